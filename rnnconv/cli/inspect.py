from __future__ import annotations

import json

import click

from rnnconv.cli.options import json_option


@click.command("inspect")
@click.argument("model", type=click.Path(dir_okay=False))
@json_option
def command(model, as_json):
    """Show MODEL's IR version, opsets and every recurrent node, with the runtimes that can run it as is. An
    OpenVINO IR MODEL (.xml): its layers, and every recurrent layer with what from-openvino makes of it.

    \b
    Example: rnnconv inspect fixtures/lstm14_layout1_all_features.onnx
    """
    from rnnconv.commands.inspect import inspect  # on use: `rnnconv --help` stays light

    info = inspect(model)
    if as_json:
        click.echo(json.dumps(info, indent=2))
        return
    if info["format"] == "openvino-ir":
        _ir(model, info)
        return
    opsets = ", ".join(f"{d or 'ai.onnx'} {v}" for d, v in info["opset_import"].items())
    click.echo(f"{model}: IR version {info['ir_version']}, opsets: {opsets}")
    for line in info["unrolled"]:
        click.echo(f"unrolled: {line}")
    if not info["nodes"]:
        click.echo("no recurrent nodes")
        return
    header = ("name", "op", "dir", "I", "H", "layout", "activations", "clip", "lbr", "if", "peep", "optional",
              "const", "onnxruntime", "openvino")
    rows = []
    for n in info["nodes"]:
        acts = " | ".join(",".join(a) for a in n["activations"])
        rows.append((n["name"], f"{n['op']}-{n['version']}", n["direction"], n["input_size"], n["hidden_size"],
                     n["layout"], acts, n["clip"] if n["clip"] is not None else "-", n["linear_before_reset"],
                     n["input_forget"], "yes" if n["peepholes"] else "no", ",".join(n["optional_inputs"]) or "-",
                     "yes" if n["weights_constant"] else "no",
                     "yes" if n["runs_in"]["onnxruntime"] else "no", "yes" if n["runs_in"]["openvino"] else "no"))
    _table(header, rows)
    for n in info["nodes"]:
        if "domain" in n:  # a quantized node: how its weights are stored
            stored = (f"{n['weights']} weights, one scale per {'gate row' if n['per_channel'] else 'direction'}"
                      if n["weights"] else "weights computed at run time")
            click.echo(f"  {n['name']}: {n['domain']}, {stored}")
        for rt, why in n["why_not"].items():
            click.echo(f"  {n['name']}: {rt}: {'; '.join(why)}")


def _ir(model, info: dict) -> None:
    layers = ", ".join(f"{t} {n}" for t, n in sorted(info["layers"].items(), key=lambda kv: (-kv[1], kv[0])))
    click.echo(f"{model}: OpenVINO IR version {info['ir_version']}, {sum(info['layers'].values())} layers ({layers})")
    click.echo(f"from-openvino: {info['from_openvino']}")
    if not info["nodes"]:
        click.echo("no recurrent layers")
        return
    header = ("name", "type", "dir", "I", "H", "activations", "clip", "lbr", "dtype", "onnxruntime", "openvino")
    rows = []
    for n in info["nodes"]:
        if n["kind"] is None:  # a TensorIterator / Loop recurrence
            rows.append((n["name"], n["type"], *["-"] * 7, *("yes" if n["runs_in"][rt] else "no"
                                                             for rt in ("onnxruntime", "openvino"))))
            continue
        lbr = int(n["linear_before_reset"]) if "linear_before_reset" in n else "-"
        kind = f"{n['type']}-{n['version'].removeprefix('opset')}" + (f" ({n['cells'][0]})" if "cells" in n else "")
        rows.append((n["name"], kind, n["direction"],
                     n["input_size"] if n["input_size"] is not None else "?",
                     n["hidden_size"] if n["hidden_size"] is not None else "?", ",".join(n["activations"]),
                     n["clip"] if n["clip"] is not None else "-", lbr, n["dtype"] or "?",
                     *("yes" if n["runs_in"][rt] else "no" for rt in ("onnxruntime", "openvino"))))
    _table(header, rows)
    for n in info["nodes"]:
        click.echo(f"  {n['name']}: from-openvino: {n['from_openvino']}")
        for rt, why in n["why_not"].items():
            click.echo(f"  {n['name']}: {rt}: {'; '.join(why)}")


def _table(header: tuple, rows: list) -> None:
    table = [tuple(str(c) for c in r) for r in [header, *rows]]
    widths = [max(len(r[i]) for r in table) for i in range(len(header))]
    for r in table:
        click.echo("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
