"""``extension.process`` through the CLI: handshake, invocation, replay, crash, bad replies.

The extensions are small Python scripts written into the test's workspace. Each invocation
appends a line to ``marker.txt``, so the tests can count how often the effect really ran.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import Cli, StartCli

PROTOCOL = "agentctl.dev/process-extension/v1"
INPUT = {"type": "object", "properties": {"file": {"type": "string"}}, "required": ["file"]}
OUTPUT = {"type": "object", "properties": {"lines": {"type": "integer"}}, "required": ["lines"]}

SCRIPT = """\
import json, os, sys, time
HANDSHAKE = {handshake}
if sys.argv[-1] == "--agentctl-handshake":
    print(json.dumps(HANDSHAKE))
elif sys.argv[-1] == "--agentctl-invoke":
    req = json.load(sys.stdin)
    with open("marker.txt", "a") as m:
        m.write(req["effectId"] + "\\n")
    if os.path.exists("delay.txt"):  # the environment is cleared, so a file says how long
        time.sleep(float(open("delay.txt").read()))
    lines = len(open(req["input"]["file"]).read().splitlines())
    os.makedirs("artifacts", exist_ok=True)
    with open("artifacts/report.json", "w") as f:
        json.dump({{"lines": lines}}, f)
    reply = {{"protocolVersion": "{protocol}", "effectId": req["effectId"], "output": {{"lines": lines}}}}
    reply.update({override})
    print({printer})
"""

WORKFLOW = """\
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {{ name: ext }}
spec:
  policy: {{ approval: never, processAllowlist: [{program}] }}
  actions:
    report:
      kind: extension.process
      command: {python}
      args: [ext.py]
      timeoutSeconds: 60
      protocolVersion: {protocol}
      inputSchema: {input}
      outputSchema: {output}
      capabilities: [report]
  tasks:
    - {{ id: report, uses: action:report, with: {{ file: fixture.txt }} }}
  outputs:
    lines: "${{{{ tasks.report.output.lines }}}}"
"""


def _setup(
    tmp_path: Path,
    *,
    handshake: dict[str, object] | None = None,
    override: str = "{}",
    printer: str = "json.dumps(reply)",
) -> Path:
    shake = handshake or {
        "protocolVersion": PROTOCOL,
        "inputSchema": INPUT,
        "outputSchema": OUTPUT,
        "capabilities": ["report"],
    }
    script = SCRIPT.format(
        handshake=repr(shake), protocol=PROTOCOL, override=override, printer=printer
    )
    (tmp_path / "ext.py").write_text(script)
    (tmp_path / "fixture.txt").write_text("a\nb\nc\n")
    wf = WORKFLOW.format(
        program=os.path.basename(sys.executable),
        python=sys.executable,
        protocol=PROTOCOL,
        input=json.dumps(INPUT),
        output=json.dumps(OUTPUT),
    )
    (tmp_path / "wf.yaml").write_text(wf)
    return tmp_path / "wf.yaml"


def _marker(tmp_path: Path) -> list[str]:
    path = tmp_path / "marker.txt"
    return path.read_text().split() if path.exists() else []


def test_runs_checks_output_and_replay_invokes_nothing(cli: Cli, tmp_path: Path) -> None:
    _setup(tmp_path)
    done = cli("--output", "json", "run", "wf.yaml")
    assert done.rc == 0, done.stderr
    assert done.data["output"] == {"lines": 3}
    assert json.loads((tmp_path / "artifacts" / "report.json").read_text()) == {"lines": 3}
    [effect_id] = _marker(tmp_path)
    effects = cli("--output", "json", "effects", "list", done.data["runId"]).data["effects"]
    assert [(e["effectId"], e["operation"], e["status"]) for e in effects] == [
        (effect_id, "extension.process", "succeeded")
    ]
    replayed = cli("--output", "json", "replay", done.data["runId"])
    assert replayed.rc == 0, replayed.stderr
    assert replayed.data["output"] == {"lines": 3}
    assert _marker(tmp_path) == [effect_id]  # replay invoked nothing


def test_a_handshake_may_name_the_program(cli: Cli, tmp_path: Path) -> None:
    """The protocol's handshake carries the program's ``name`` (the original's published
    extensions all send one): it is accepted, and the invocation runs."""
    shake = {
        "protocolVersion": PROTOCOL,
        "name": "line-counter",
        "inputSchema": INPUT,
        "outputSchema": OUTPUT,
        "capabilities": ["report"],
    }
    _setup(tmp_path, handshake=shake)
    done = cli("--output", "json", "run", "wf.yaml")
    assert done.rc == 0, done.stderr
    assert done.data["output"] == {"lines": 3}
    assert len(_marker(tmp_path)) == 1


def test_capabilities_must_come_in_the_declared_order(cli: Cli, tmp_path: Path) -> None:
    """ "The ordered capability list must exactly match": the same capabilities in another
    order are another program's, refused before anything is invoked."""
    shake = {
        "protocolVersion": PROTOCOL,
        "inputSchema": INPUT,
        "outputSchema": OUTPUT,
        "capabilities": ["summary", "report"],
    }
    wf = _setup(tmp_path, handshake=shake)
    text = wf.read_text()
    wf.write_text(text.replace("capabilities: [report]", "capabilities: [report, summary]"))
    done = cli("--output", "json", "run", "wf.yaml")
    assert done.rc == 4, (done.stdout, done.stderr)
    assert "capabilities differ" in done.error["error"]["message"]
    assert _marker(tmp_path) == []


def test_sigkill_mid_invocation_leaves_it_uncertain(
    cli: Cli, start_cli: StartCli, tmp_path: Path
) -> None:
    wf = _setup(tmp_path)
    (tmp_path / "delay.txt").write_text("30")
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    proc = start_cli("--output", "json", "run", str(wf), start_new_session=True, **quiet)
    deadline = time.monotonic() + 60
    while not _marker(tmp_path) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _marker(tmp_path), "the extension was never invoked"
    os.killpg(proc.pid, signal.SIGKILL)  # the coordinator, its workers and the extension
    proc.wait()
    run_id = cli("--output", "json", "runs", "list").data["runs"][0]["runId"]
    resumed = cli("--output", "json", "resume", run_id)
    assert resumed.rc == 3, resumed.stderr
    [effect_id] = _marker(tmp_path)
    assert effect_id in resumed.error["error"]["message"]
    assert len(_marker(tmp_path)) == 1  # resume did not invoke it again


@pytest.mark.parametrize(
    ("handshake", "needle"),
    [
        ({"protocolVersion": "other/v9"}, "handshake protocolVersion"),
        (
            {
                "protocolVersion": PROTOCOL,
                "inputSchema": INPUT,
                "outputSchema": OUTPUT,
                "capabilities": [],
            },
            "no capabilities",
        ),
        (
            {
                "protocolVersion": PROTOCOL,
                "inputSchema": INPUT,
                "outputSchema": OUTPUT,
                "capabilities": ["report"],
                "extraKey": 1,
            },
            "its handshake has the unknown key 'extraKey'",
        ),
        (
            {
                "protocolVersion": PROTOCOL,
                "name": 7,
                "inputSchema": INPUT,
                "outputSchema": OUTPUT,
                "capabilities": ["report"],
            },
            "its handshake name is not text",
        ),
    ],
)
def test_bad_handshakes_fail_clearly_and_invoke_nothing(  # type: ignore[no-untyped-def]
    cli: Cli, tmp_path: Path, handshake, needle
) -> None:
    _setup(tmp_path, handshake=handshake)
    done = cli("--output", "json", "run", "wf.yaml")
    assert done.rc == 4, (done.stdout, done.stderr)
    message = done.error["error"]["message"]
    assert "extension" in message and needle in message, message
    # Named as the workflow runs it: the interpreter and its script, not `python3` alone.
    assert f"extension '{Path(sys.executable).name} ext.py' (handshake)" in message, message
    assert "Traceback" not in done.stderr
    assert _marker(tmp_path) == []


@pytest.mark.parametrize(
    ("override", "printer", "needle"),
    [
        ('{"effectId": "someone-else"}', "json.dumps(reply)", "for effect 'someone-else'"),
        ('{"output": {"lines": "three"}}', "json.dumps(reply)", "breaks outputSchema"),
        ("{}", "'not json at all'", "not one JSON object"),
        ('{"extraKey": 2}', "json.dumps(reply)", "its reply has the unknown key 'extraKey'"),
        ("{}", "'x' * 3_000_000", "was stopped"),
    ],
)
def test_bad_replies_leave_the_invocation_uncertain(  # type: ignore[no-untyped-def]
    cli: Cli, tmp_path: Path, override, printer, needle
) -> None:
    """The extension ran (it wrote its marker): a bad reply must not let `retry` invoke it again."""
    _setup(tmp_path, override=override, printer=printer)
    done = cli("--output", "json", "run", "wf.yaml")
    assert done.rc == 4, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    run_id = done.error["error"]["runId"]
    [effect] = cli("--output", "json", "effects", "list", run_id).data["effects"]
    assert effect["status"] == "uncertain", effect
    assert "extension" in effect["error"] and needle in effect["error"], effect["error"]
    retried = cli("--output", "json", "retry", "wf.yaml", run_id, "--failed")
    assert retried.rc == 3, (retried.stdout, retried.stderr)
    assert [b["rule"] for b in retried.data["blockedReuse"]] == ["unreconciled_effect"]
    assert _marker(tmp_path) == [effect["effectId"]]  # invoked once, never again


@pytest.mark.parametrize(
    ("given", "path"),
    [
        ("{}", "spec.tasks.0.with"),
        ("{ file: fixture.txt, bogus: 1 }", "spec.tasks.0.with.bogus"),
        ("{ file: 3 }", "spec.tasks.0.with.file"),
    ],
)
def test_a_literal_input_breaking_the_schema_fails_check(  # type: ignore[no-untyped-def]
    cli: Cli, tmp_path: Path, given, path
) -> None:
    """A wholly literal `with` is the extension's input already: check refuses it (exit 2,
    at the offending value) instead of a run that fails on it."""
    _setup(tmp_path)
    text = (tmp_path / "wf.yaml").read_text().replace("{ file: fixture.txt }", given)
    closed = '"required": ["file"], "additionalProperties": false}'
    (tmp_path / "wf.yaml").write_text(text.replace('"required": ["file"]}', closed, 1))
    done = cli("--output", "json", "check", "wf.yaml")
    assert done.rc == 2, (done.stdout, done.stderr)
    [diag] = done.error["diagnostics"]
    assert diag["path"] == path and "inputSchema" in diag["message"], diag
    assert cli("--output", "json", "runs", "list").data["runs"] == []


def test_input_breaking_the_schema_fails_before_any_effect(cli: Cli, tmp_path: Path) -> None:
    # Templated: the input is known once rendered, so the run (not check) refuses it.
    _setup(tmp_path)
    text = (tmp_path / "wf.yaml").read_text()
    text = text.replace("with: { file: fixture.txt }", 'with: { file: "${{ inputs.file }}" }')
    text = text.replace("  actions:\n", "  inputs: { file: 3 }\n  actions:\n")
    (tmp_path / "wf.yaml").write_text(text)
    assert cli("check", "wf.yaml").rc == 0
    done = cli("--output", "json", "run", "wf.yaml")
    assert done.rc == 4, (done.stdout, done.stderr)
    assert "inputSchema" in done.error["error"]["message"]
    run_id = done.error["error"]["runId"]
    assert cli("--output", "json", "effects", "list", run_id).data["effects"] == []
    assert _marker(tmp_path) == []


@pytest.mark.parametrize(
    ("edit", "needle"),
    [
        (
            ("protocolVersion: agentctl.dev/process-extension/v1", "protocolVersion: v0"),
            "protocolVersion",
        ),
        (("capabilities: [report]", "capabilities: [report, report]"), "capabilities"),
        (("      capabilities: [report]\n", ""), "capabilities"),
    ],
)
def test_bad_declarations_fail_check(cli: Cli, tmp_path: Path, edit, needle) -> None:  # type: ignore[no-untyped-def]
    _setup(tmp_path)
    text = (tmp_path / "wf.yaml").read_text()
    assert edit[0] in text
    (tmp_path / "wf.yaml").write_text(text.replace(edit[0], edit[1]))
    done = cli("--output", "json", "check", "wf.yaml")
    assert done.rc == 2, done.stdout
    assert needle in done.stderr


def test_an_applied_result_must_meet_the_output_schema(cli: Cli, tmp_path: Path) -> None:
    """The operator's result becomes the task's output on resume: a reply that breaks the
    contract is refused from an operator as it is from the extension."""
    _setup(tmp_path, printer="'not json at all'")
    run_id = cli("--output", "json", "run", "wf.yaml").error["error"]["runId"]
    [effect] = cli("--output", "json", "effects", "list", run_id).data["effects"]
    reconcile = ("effects", "reconcile", effect["effectId"], "--status", "applied")
    for bad in ('{"lines": "three"}', "[3]"):
        (tmp_path / "result.json").write_text(bad)
        refused = cli(
            "--output", "json", *reconcile, "--reason", "r", "--result-file", "result.json"
        )
        assert refused.rc == 4, (refused.stdout, refused.stderr)
        assert "outputSchema" in refused.error["error"]["message"]
    seen = cli("--output", "json", "effects", "inspect", effect["effectId"]).data
    assert seen["reconciliations"] == []  # nothing was recorded
    (tmp_path / "result.json").write_text('{"lines": 3}')
    done = cli("--output", "json", *reconcile, "--reason", "it ran", "--result-file", "result.json")
    assert done.rc == 0, done.stderr
    resumed = cli("--output", "json", "resume", run_id)
    assert resumed.rc == 0, resumed.stderr
    assert resumed.data["output"] == {"lines": 3}
    assert _marker(tmp_path) == [effect["effectId"]]  # the recorded result, not a new call


# A handshake that talks, then exits with ``code`` (3) or, exiting 0, declares another protocol.
REFUSED_HANDSHAKE = """\
import json, os, sys
if sys.argv[-1] == "--agentctl-handshake":
    print(json.dumps({{"protocolVersion": "other/v9", "note": "for " + os.environ["TOKEN"]}}))
    print("no config for " + os.environ["TOKEN"], file=sys.stderr)
    sys.exit({code})
open("marker.txt", "a").write("invoked\\n")
"""


# The workflow's edits: the secret ``TOKEN`` in the extension's env, output limits, a budget.
SECRET_ENV_AND_BUDGET = {
    "approval: never,": "approval: never, environmentAllowlist: [EXT_TOKEN],",
    "capabilities: [report]": "capabilities: [report]\n      env: { TOKEN: { env: EXT_TOKEN } }"
    "\n      combinedOutputLimitBytes: 1000",
    "spec:\n": "spec:\n  runtime: { budgets: { maxProcessOutputBytes: 5000 } }\n",
}


@pytest.mark.parametrize(
    ("code", "needle"), [(3, "exited with code 3"), (0, "handshake protocolVersion differs")]
)
def test_a_refused_handshake_keeps_what_it_printed(  # type: ignore[no-untyped-def]
    cli: Cli, tmp_path: Path, code, needle
) -> None:
    # Definitive (nothing was invoked), so like a shell step that exits non-zero the failed
    # effect and task keep the process's exit code and redacted output, not only the error.
    _setup(tmp_path)
    (tmp_path / "ext.py").write_text(REFUSED_HANDSHAKE.format(code=code))
    text = (tmp_path / "wf.yaml").read_text()
    for old, new in SECRET_ENV_AND_BUDGET.items():
        text = text.replace(old, new)
    (tmp_path / "wf.yaml").write_text(text)
    secret = "s3cr3t" + os.urandom(8).hex()
    done = cli("--output", "json", "run", "wf.yaml", env={"EXT_TOKEN": secret})
    assert done.rc == 4, (done.stdout, done.stderr)
    assert needle in done.error["error"]["message"] and secret not in done.stderr
    shown = cli("--output", "json", "inspect", done.error["error"]["runId"])
    assert secret not in shown.stdout
    said = json.dumps({"protocolVersion": "other/v9", "note": "for [REDACTED]"})
    expected = {
        "status": "failed",
        "changed": False,  # the handshake only describes the extension: nothing was invoked
        "exitCode": code,
        "stdout": said + "\n",
        "stderr": "no config for [REDACTED]\n",
    }
    [effect] = shown.data["effects"]
    assert effect["status"] == "failed" and effect["result"] == expected, effect
    [task] = shown.data["tasks"]
    assert task["state"] == "failed" and task["output"] == expected, task
    # What both streams held before redaction (the secret once in each) counts, as for a shell.
    printed = (
        len(expected["stdout"]) + len(expected["stderr"]) + 2 * (len(secret) - len("[REDACTED]"))
    )
    assert shown.data["budget"]["usage"]["processOutputBytes"] == printed
    assert _marker(tmp_path) == []
