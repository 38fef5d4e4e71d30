"""to-openvino's whole-model check in OpenVINO's runtime (a child process, as the CLI runs it) starts before the
other checks: the process is started with the command, is handed the IR as soon as it is written, and compiles it
while the node checks run; the runner collects that run instead of starting another. The process never
outlives the command, whatever happens."""

from __future__ import annotations

import pytest

from rnnconv.engine import openvino_runtime
from rnnconv.errors import Unsupported
from rnnconv.verification import checks, engines, runner
from tests.conftest import FIXTURES, conv_lstm

pytest.importorskip("openvino")


@pytest.fixture
def events(monkeypatch):
    """What happens, in order: workers started and handed jobs, node checks, runtime runs outside a worker."""
    seen, workers = [], []
    worker_init, submit, check_nodes, run = (openvino_runtime.Worker.__init__, openvino_runtime.Worker.submit,
                                             runner.check_nodes, engines.run_once)

    def init(self):
        worker_init(self)
        workers.append(self)
        seen.append("start")

    def handed(self, *args, **kwargs):
        seen.append("submit")
        return submit(self, *args, **kwargs)

    def nodes(*args, **kwargs):
        seen.append("node checks")
        return check_nodes(*args, **kwargs)

    def engine_run(engine, *args, **kwargs):
        if engine == "openvino":
            seen.append("openvino run")
        return run(engine, *args, **kwargs)

    monkeypatch.setattr(openvino_runtime.Worker, "__init__", init)
    monkeypatch.setattr(openvino_runtime.Worker, "submit", handed)
    monkeypatch.setattr(runner, "check_nodes", nodes)
    monkeypatch.setattr(engines, "run_once", engine_run)
    return seen, workers


@pytest.mark.parametrize("source", [FIXTURES / "lstm7_peepholes.onnx", conv_lstm("1d")], ids=["own", "openvino"])
def test_the_runtime_compiles_while_the_node_checks_run(tmp_path, events, source):
    from rnnconv.commands.to_openvino import to_openvino

    seen, workers = events
    report = to_openvino(source, tmp_path / "m.xml", isolate=True).report
    assert report.ok and any("OpenVINO runtime" in c.engines for c in report.checks)
    assert seen == ["start", "submit", "node checks"]  # one runtime run, handed over before the node checks
    assert all(w.proc.returncode is not None for w in workers)


def test_big_layers_leave_the_interpreters_whole_model_run_to_the_runtime(tmp_path, events, monkeypatch):
    from rnnconv.commands.to_openvino import to_openvino

    monkeypatch.setattr(checks, "BIG_WEIGHT_BYTES", 0)  # every layer counts as big
    report = to_openvino(FIXTURES / "lstm7_bidirectional.onnx", tmp_path / "m.xml", isolate=True).report
    assert report.ok
    assert [(c.subject, c.engines) for c in report.checks] == [
        ("node lstm", "engine, float32 vs IR interpreter, float32"),
        ("model", "onnxruntime vs OpenVINO runtime (CPU, f32)")]
    assert any("the whole model left out" in n for n in report.notes)
    # Without the runtime the interpreter's run is the whole-model check.
    report = to_openvino(FIXTURES / "lstm7_bidirectional.onnx", tmp_path / "n.xml", isolate=True,
                         runtime=False).report
    assert [c.engines for c in report.checks][1] == "onnxruntime vs IR interpreter, float32"


def test_the_runtimes_process_ends_when_the_command_fails(tmp_path, events, monkeypatch):
    from rnnconv.commands import to_openvino as command

    seen, workers = events

    def refused(model, *args, **kwargs):
        raise Unsupported("refused after the runtime's process started")

    with monkeypatch.context() as m:
        m.setattr(command, "onnx_to_ir", refused)
        with pytest.raises(Unsupported):
            command.to_openvino(FIXTURES / "lstm7_peepholes.onnx", tmp_path / "m.xml", isolate=True,
                                route="rnnconv")
    assert seen == ["start"] and workers[0].proc.returncode is not None
    command.to_openvino(FIXTURES / "lstm7_peepholes.onnx", tmp_path / "n.xml", isolate=True, verify="node")
    assert seen == ["start", "node checks"]  # no whole-model check: no runtime process
