"""Files: reading and checking ONNX models (`reading`, with `constant_data` and `dims`), writing every output
atomically (`writing`), and memory-mapped weights (`mapping`).

Which modules may import what (tests/test_layering.py enforces it): `onnx` only rnnconv.io.reading,
rnnconv.schemas and rnnconv.engine.reference; `onnxruntime` only rnnconv.engine.onnxruntime_runtime and
rnnconv.engine.ort_worker; `openvino` only rnnconv.engine.openvino_runtime (the runtime) and
rnnconv.dialects.openvino.frontend (OpenVINO's ONNX import, with rnnconv's recurrent mapping grafted in).
Everything else works on onnx_ir models and rnnconv's IR graphs.
"""

from rnnconv.io.mapping import KernelCopier, release_external, release_pages
from rnnconv.io.reading import check_full, check_input, load, source_name, to_proto
from rnnconv.io.writing import (
    ALIGNMENT,
    SMALL_TENSOR_BYTES,
    EarlyCopy,
    Staged,
    atomic_write,
    check_suffix,
    external_paths,
    guard_output,
    save,
    stage,
)

__all__ = ["ALIGNMENT", "SMALL_TENSOR_BYTES", "EarlyCopy", "KernelCopier", "Staged", "atomic_write", "check_full",
           "check_input", "check_suffix", "external_paths", "guard_output", "load", "release_external",
           "release_pages", "save", "source_name", "stage", "to_proto"]
