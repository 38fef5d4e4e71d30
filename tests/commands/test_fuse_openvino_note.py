"""fuse's report says where OpenVINO runs the fused form slower than the unrolled steps it replaces: a forward and
a reverse RNN over one sequence (dynamo's bidirectional nn.RNN), measured by benchmarks/fuse.py; nothing is said
for the fusions it runs as fast or faster."""

from __future__ import annotations

import rnnconv
from tests.conftest import FIXTURES

FUSE = FIXTURES / "fuse"
SLOWER = "0.83-0.89x"


def test_forward_and_reverse_rnn_fusions_carry_the_measured_ratio():
    fused = rnnconv.fuse(FUSE / "rnn_two_layers_bidirectional_batch_first_initial_state_dynamo.onnx", verify="none")
    assert [n for n in fused.report.notes if SLOWER in n and "OpenVINO" in n]


def test_one_way_rnn_fusion_does_not():
    fused = rnnconv.fuse(FUSE / "rnn_dynamo.onnx", verify="none")
    assert not [n for n in fused.report.notes if SLOWER in n]
