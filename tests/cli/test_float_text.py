"""Floats in rendered text, in ids and in the CLI's JSON are spelled as the original spells
them (serde_json).

Black box, in a fresh directory: an input of ``0.00001`` interpolated into ``--lr=…`` reaches
the process as ``--lr=0.00001`` (Python alone would write ``1e-05``), ``1e16`` as ``1e16``
(not ``1e+16``), in a ``with`` value, an argv item and an exact argv expression alike; a
foreach child over ``0.00001`` gets the id the original derives from ``"item":0.00001``; and
``inspect``/``plan`` print those inputs and bindings with the same spelling.
"""

from __future__ import annotations

from pathlib import Path

from tests.conftest import Cli

FLOW = """\
apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: { name: floats }
spec:
  inputs: { lr: 0.5, big: 1.0e16 }
  policy: { approval: never, processAllowlist: [echo] }
  actions:
    put: { kind: builtin.assign }
    say: { kind: builtin.shell.exec, command: echo, args: ["--lr=${{ inputs.lr }}", "${{ inputs.big }}"], timeoutSeconds: 5 }
    item: { kind: builtin.shell.exec, command: echo, args: ["item=${{ vars.item }}"], timeoutSeconds: 5 }
  tasks:
    - { id: keep, uses: "action:put", with: { arg: "--lr=${{ inputs.lr }}", b: "n=${{ inputs.big }}" } }
    - { id: say, uses: "action:say" }
    - { id: each, uses: "action:item", foreach: { items: [0.00001] } }
"""


def test_floats_render_as_the_original_writes_them(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "wf.yaml").write_text(FLOW, encoding="utf-8")
    done = cli("--output", "json", "run", "wf.yaml", "--input", "lr=0.00001", "--db", "f.db")
    assert done.rc == 0, done.stderr
    output = done.data["output"]
    assert output["keep"]["output"] == {"arg": "--lr=0.00001", "b": "n=1e16"}
    assert output["say"]["stdout"] == "--lr=0.00001 1e16\n"
    # spec/dsl.md §4.8: the first 12 hex of sha256('{"foreachIndex":0,"item":0.00001}').
    assert output["each--0000-264321243c1d"]["stdout"] == "item=0.00001\n"
    effects = cli("--output", "json", "effects", "list", done.data["runId"], "--db", "f.db")
    recorded = {e["taskId"]: e["request"]["input"] for e in effects.data["effects"]}
    assert recorded["say"]["args"] == ["--lr=0.00001", "1e16"]


def test_json_output_spells_floats_as_the_original_prints_them(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "wf.yaml").write_text(FLOW, encoding="utf-8")
    done = cli("--output", "json", "run", "wf.yaml", "--input", "lr=0.00001", "--db", "f.db")
    assert done.rc == 0, done.stderr
    shown = cli("--output", "json", "inspect", done.data["runId"], "--db", "f.db")
    assert shown.rc == 0, shown.stderr
    assert '"lr":0.00001' in shown.stdout and '"big":1e16' in shown.stdout
    assert "1e-05" not in shown.stdout and "e+16" not in shown.stdout
    assert shown.data["run"]["inputs"] == {"lr": 0.00001, "big": 1e16}
    planned = cli("--output", "json", "plan", "wf.yaml")
    assert '"item":0.00001' in planned.stdout, planned.stdout
    # --verbose adds the data, indented, to the human view: spelled the same.
    verbose = cli("--verbose", "inspect", done.data["runId"], "--db", "f.db")
    assert verbose.rc == 0, verbose.stderr
    assert '"lr": 0.00001' in verbose.stdout and '"big": 1e16' in verbose.stdout
