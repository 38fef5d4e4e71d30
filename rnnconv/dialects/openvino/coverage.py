"""What from-openvino reads, generated from the op registry (`registry.IR_OPS`): every IR layer type with an ONNX
mapping (and the ONNX ops to-openvino writes it for), and every other operation type of OpenVINO opsets 1-16 with
the reason it has none (`NO_MAPPING`). tests/dialects/openvino/test_openvino_written_ir.py holds the list against
the installed openvino's opset tables and tests every mapped type both ways on IR that OpenVINO itself wrote.
`python -m rnnconv.dialects.openvino.coverage` prints docs/openvino.md's table.
"""

from __future__ import annotations

from rnnconv.dialects.openvino import registry

_NO_ONNX_OP = "no ONNX operator computes it"
_DETECTION = "detection post-processing with no ONNX operator of the same definition"
NO_MAPPING: dict[str, str] = {
    **dict.fromkeys(("Assign", "ReadValue"), "a stateful variable: ONNX graphs hold no state between runs"),
    **dict.fromkeys(("RandomUniform", "Multinomial"), "random numbers: ONNX's generators give other numbers"),
    **dict.fromkeys(("BinaryConvolution", "Bucketize", "CTCGreedyDecoder", "CTCGreedyDecoderSeqLen", "CTCLoss",
                     "ConvertPromoteTypes", "DeformablePSROIPooling", "EmbeddingBagOffsets",
                     "EmbeddingBagOffsetsSum", "EmbeddingBagPacked", "EmbeddingBagPackedSum",
                     "EmbeddingSegmentsSum", "ExtractImagePatches", "FakeConvert", "GRN", "GatherTree",
                     "I420toBGR", "I420toRGB", "ISTFT", "Inverse", "NV12toBGR", "NV12toRGB", "Reverse", "Roll",
                     "SearchSorted", "SegmentMax", "SliceScatter", "SparseFillEmptyRows", "StringTensorPack",
                     "StringTensorUnpack", "BatchToSpace", "SpaceToBatch", "ShuffleChannels"), _NO_ONNX_OP),
    **dict.fromkeys(("DetectionOutput", "ExperimentalDetectronDetectionOutput",
                     "ExperimentalDetectronGenerateProposalsSingleImage", "ExperimentalDetectronPriorGridGenerator",
                     "ExperimentalDetectronROIFeatureExtractor", "ExperimentalDetectronTopKROIs",
                     "GenerateProposals", "MatrixNms", "MulticlassNms", "NMSRotated", "NonMaxSuppression",
                     "PSROIPooling", "PriorBox", "PriorBoxClustered", "Proposal", "ROIAlign", "ROIAlignRotated",
                     "ROIPooling", "RegionYolo", "ReorgYolo"), _DETECTION),
    **dict.fromkeys(("AdaptiveAvgPool", "AdaptiveMaxPool"),
                    "ONNX pools take fixed kernels: the windows of an adaptive pool depend on the input size"),
    "FakeQuantize": "not mapped: ONNX QuantizeLinear + DequantizeLinear express only 256 levels on ranges that "
                    "include 0 with a zero point",
    **dict.fromkeys(("BitwiseLeftShift", "BitwiseRightShift"),
                    "not mapped: ONNX BitShift takes unsigned integers only"),
    **dict.fromkeys(("DFT", "IDFT", "IRDFT"), "not mapped yet (ONNX DFT from opset 17; RDFT is mapped)"),
    **dict.fromkeys(("Col2Im", "DeformableConvolution", "Eye", "GridSample", "GroupNormalization", "LRN",
                     "NormalizeL2", "OneHot", "ReduceLogicalAnd", "ReduceLogicalOr", "ScatterUpdate", "Unique"),
                    "not mapped yet: an ONNX operator computes it (none of the small models OpenVINO's ONNX import "
                    "and PyTorch frontend wrote for rnnconv's tests holds it)"),
}


def mapped() -> dict[str, list[str]]:
    """IR layer type -> the ONNX ops to-openvino writes it for (recurrent and control flow layers included)."""
    return {t: sorted(e.onnx) for t, e in sorted(registry.IR_OPS.items()) if t not in ("Parameter", "Const", "Result")}


def coverage() -> str:
    """docs/openvino.md's table of IR layer types."""
    lines = ["| IR layer type | to-openvino writes it for |", "| --- | --- |"]
    lines += [f"| {t} | {', '.join(onnx) or '(from-openvino only)'} |" for t, onnx in mapped().items()]
    reasons: dict[str, list[str]] = {}
    for t, why in sorted(NO_MAPPING.items()):
        reasons.setdefault(why, []).append(t)
    lines += [f"| no mapping: {', '.join(types)} | {why} |" for why, types in reasons.items()]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(coverage(), end="")
