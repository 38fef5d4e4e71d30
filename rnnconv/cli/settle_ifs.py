from __future__ import annotations

import functools

from rnnconv.cli.batch import converting
from rnnconv.cli.helptext import filled
from rnnconv.cli.options import option

VERIFY_MODES = ("full", "none")  # no recurrent node is rewritten: no node to check alone


@converting("settle-ifs", progress=True, verify_modes=VERIFY_MODES)
@option("--external-data", is_flag=True, help="Keep the weights in OUT.data beside OUT (the default when the "
                                              "source has external data or its weights pass 1.8 GB).")
@filled
def command(external_data):
    """Replace each If node of MODEL whose branch the declared input shapes decide by that branch (PyTorch's
    legacy exporter writes x.squeeze(-1) and LSTMCell's `if x.dim() == 2` so), for runtimes that need static
    ranks: OpenVINO's own conversion (ov.convert_model with rnnconv.openvino_extensions()), to-openvino does it
    first. The interface is unchanged; Ifs on values stay. The report names each If settled and why. Exit
    {EXIT_UNSUPPORTED} when an If's rank is decided at run time (both branches run).

    \b
    Example: rnnconv settle-ifs fixtures/settle_ifs/if_squeeze_lstmcell_legacy16.onnx -o out/settled.onnx --dim x:2=1
    """
    from rnnconv.commands.settle_ifs import settle  # on use: `rnnconv --help` stays light

    return functools.partial(settle, external_data=external_data or None)
