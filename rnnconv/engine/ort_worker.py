"""onnxruntime in a process of its own, for the whole-model checks of big models.

Run as `python -m rnnconv.engine.ort_worker`: it imports nothing of rnnconv but this module (the package and
`rnnconv.engine` import nothing at start), so the child does not pay for onnx, onnx_ir or click. Reads one
pickled job on stdin: {"models": [(model bytes, weights, threads)], "feeds": {name: array}}, where weights maps
a graph input to an array or to (path, offset, dtype, shape) in a data file, memory-mapped here once for all
models, and threads is the session's intra-op thread count (None: onnxruntime's default). A model given as a
path (str) is loaded from its file with the default session options, as users load it (weight prepacking off:
a packed copy of a big model's weights would double this process's memory, and packing refuses nothing). Writes one pickled
list on stdout: per model, (outputs by name, "") or (None, reason). The checking process then holds none of the
weights while onnxruntime runs, so the peak is the weights once plus this small process.
"""

import os
import pickle
import sys

import numpy as np


def main() -> None:
    os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")  # no files in home and temp (rnnconv.engine.telemetry)
    if sys.argv[1:] == ["--serve"]:  # batch mode: one child answers every model's job (rnnconv.engine.serving)
        from rnnconv.engine.serving import serve

        serve(answer)
        return
    pickle.dump(answer(pickle.load(sys.stdin.buffer)), sys.stdout.buffer)


def answer(job: dict) -> list:
    import onnxruntime as ort

    ort.set_default_logger_severity(4)
    maps: dict = {}

    def array(spec):
        if isinstance(spec, np.ndarray):
            return spec
        if spec not in maps:
            path, offset, dtype, shape = spec
            maps[spec] = np.memmap(path, dtype=np.dtype(dtype), mode="r", offset=offset, shape=tuple(shape))
        return maps[spec]

    answers = []
    for model, weights, threads in job["models"]:
        try:
            options = ort.SessionOptions()
            options.log_severity_level = 4
            if threads is not None:
                options.intra_op_num_threads = threads
            if isinstance(model, str):
                options.add_session_config_entry("session.disable_prepacking", "1")
            session = ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])
            taken = {i.name for i in session.get_inputs()}
            names = [o.name for o in session.get_outputs()]
            feeds = {k: v for k, v in job["feeds"].items() if k in taken}
            values = session.run(None, {**{k: array(v) for k, v in weights.items()}, **feeds})
            answers.append(({n: np.asarray(v) for n, v in zip(names, values)}, ""))
        except Exception as err:  # refused or failed: the caller decides what that means
            lines = [ln.strip() for ln in str(err).splitlines() if ln.strip()]
            answers.append((None, lines[-1][:300] if lines else type(err).__name__))
        session = None
    return answers


if __name__ == "__main__":
    main()
