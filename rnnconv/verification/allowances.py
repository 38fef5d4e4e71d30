"""Why a whole-model comparison is left out, or held to another tolerance: facts about this machine (memory to
compile), rnnconv's IR interpreter (kernels it lacks), the runtimes (what they refuse, what OpenVINO's import
approximates) and the models (quantization computed at run time). `plan.choose` asks; each answer is the sentence
the report prints. Whether a failing comparison is faithful up to run-time rounding is `localize`'s verdict, from
what each node computes."""

from __future__ import annotations

from typing import Optional

from rnnconv import runtimes
from rnnconv.dialects import onnx_quantized, onnx_recurrent
from rnnconv.engine import ONNXRUNTIME, OPENVINO, ir_graph
from rnnconv.verification.model import Model

# Peak memory of OpenVINO's CPU plugin compiling an IR, per byte of its constants (measured with OpenVINO 2026.4
# on LSTM IRs of 1 and 2.5 GB: 4.1x for a bidirectional LSTMSequence, OpenVINO's own IR; 3.1x for rnnconv's, one
# direction per op past from_onnx.SPLIT_BYTES), with a margin.
RUNTIME_COMPILE_FACTOR = 4.5


def would_not_fit(model: Model, factor: float = RUNTIME_COMPILE_FACTOR, available: Optional[int] = None
                  ) -> Optional[str]:
    """Why the OpenVINO runtime is left out: this machine lacks the memory to compile the IR (the kernel would
    kill the process, which says nothing about the IR), `factor` times its weights; `available`: the memory
    available (bytes). None when it fits or memory is unknown."""
    if model.format != "ir" or available is None:
        return None
    need = factor * sum(layer.value.nbytes for layer in model.graph.all_layers()
                        if layer.type == "Const" and layer.value is not None)
    if need <= available:
        return None
    return (f"OpenVINO runtime: compiling this IR needs about {need / 2**30:.1f} GiB ({factor}x "
            f"its weights), {available / 2**30:.1f} GiB is available; on a machine with more, `rnnconv verify` "
            f"with the OpenVINO engine runs it")


def available_memory() -> Optional[int]:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def interpreter_gap(model: Model) -> Optional[str]:
    """Why rnnconv's IR interpreter cannot run the IR (layer types it has no kernel for), or None."""
    if model.format != "ir":
        return None
    missing = sorted({layer.type for layer in model.graph.all_layers()
                      if layer.type not in ir_graph.KERNELS and layer.type not in ("Parameter", "Const", "Result")})
    if not missing:
        return None
    return f"IR interpreter: no kernel for {', '.join(missing)}"


def requantized(model: Model) -> Optional[str]:
    """Why the IR interpreter is left out against onnxruntime: the model quantizes at run time (DynamicQuantizeLSTM)
    values that float ops compute, and a last-bit difference in those ops between two engines moves a value across
    a rounding step, which the recurrence carries on (0.02 measured on an OCR model between onnxruntime with and
    without its graph optimizations). The node checks hold each quantized layer alone, on the same X, exactly."""
    if model.format != "onnx":
        return None
    inputs = set(model.onnx.graph.inputs)
    tipped = [node for node, _, _ in onnx_quantized.walk(model.onnx) if onnx_quantized.is_quantized_lstm(node)
              and node.inputs and node.inputs[0] is not None and node.inputs[0] not in inputs]
    if not tipped:
        return None
    return (f"IR interpreter: the whole model left out: {onnx_quantized.OP} {tipped[0].name!r} quantizes at run time "
            f"what float ops compute, where the two engines' last bits can differ and tip a rounding step; each "
            f"quantized layer was checked alone")


def approximates(engine: str, model: Model) -> Optional[str]:
    """Why a run of OpenVINO reading an ONNX model is held to the 'dequantized' tolerance from the start: its import
    computes com.microsoft DynamicQuantizeLSTM otherwise than onnxruntime's kernel, which defines the op, an
    approximation by nature (`rnnconv check --target openvino` measures it), not a runtime bug. None otherwise."""
    if engine != OPENVINO or model.format != "onnx" or not onnx_quantized.holds(model.onnx):
        return None
    return ("OpenVINO's ONNX import computes com.microsoft DynamicQuantizeLSTM otherwise than onnxruntime's kernel, "
            "which defines it: held to the 'dequantized' tolerance")


def known_refusal(model: Model, engine: str) -> Optional[str]:
    """The refusal `rnnconv.runtimes` knows for this model and runtime (layout=1 in onnxruntime...), or None."""
    if model.format != "onnx" or engine != ONNXRUNTIME:
        return None
    found = [f for rn in onnx_recurrent.find(model.onnx) for f in runtimes.node_findings(rn, engine)
             if f.effect == runtimes.REFUSES]
    return f"{found[0].node}: {found[0].problem}" if found else None
