"""Durable streaming (issue 12 item 5), through the CLI as a black box.

``stream: true`` agents send each delta through an awaited sink: the coordinator persists it
as a stream event before the worker reads on. ``--output jsonl`` prints one ``StreamEvent``
per delta live, then the ``RunOutcome``; ``inspect`` shows them under ``streamEvents``; a
coordinator killed mid-stream keeps the fragments it persisted and the model call ends
uncertain (never resent). Against an OpenAI Responses SSE fixture on 127.0.0.1 and the fake.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.clibackend import LedgerTarget
from tests.conftest import Cli, CliResult
from tests.providers import fixtures as fx
from tests.providers.fixtures import FixtureServer, Reply

KEY = "sk-stream-fixture-31"
CHUNKS = ["Dur", "able ", "str", "eam", "ing."]


def _openai_workflow(port: int) -> str:
    return fx.local_openai_spec(port, "streamer") + AGENT


AGENT = """  agents:
    talker:
      provider: main
      model: gpt-fixture
      instructions: Talk.
      stream: true
  tasks:
    - { id: t, uses: "agent:talker", with: { prompt: go } }
"""


FAKE_WITH_APPROVAL = f"""apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: {{ name: streamer-fake }}
spec:
  policy: {{ approval: mutations, writableRoots: ["."] }}
  providers:
    sim: {{ kind: fake }}
  tools:
{fx.SAVE_TOOL}  agents:
    writer:
      provider: sim
      model: m
      instructions: Write.
      tools: [save]
      stream: true
      providerOptions:
        toolInput: {{ path: out.txt, content: hi }}
        finalText: "all three words"
  tasks:
    - {{ id: w, uses: "agent:writer", with: {{ prompt: go }} }}
"""


def _lines(stdout: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stdout.splitlines() if line.strip()]


def _stream_lines(stdout: str) -> list[dict[str, Any]]:
    """The lines other than the audit's ``RunEvent``s (docs/events.md): the fragments and the
    outcome; each fragment's ``traceId`` (the invocation's, not stored with it) is dropped."""
    lines = [line for line in _lines(stdout) if line["kind"] != "RunEvent"]
    for line in lines[:-1]:
        assert line["data"].pop("traceId").startswith("trace-")
    return lines


def _inspect(cli: Cli, run_id: str) -> Any:
    return cli("--output", "json", "inspect", run_id, "--db", "r.db").data


def _stream_run(
    cli: Cli,
    tmp_path: Path,
    server: FixtureServer,
    output: str,
    chunks: list[str],
    env: dict[str, str] | None = None,
) -> CliResult:
    """``run`` the OpenAI streaming workflow against ``chunks`` served as SSE deltas."""
    (tmp_path / "wf.yaml").write_text(_openai_workflow(server.port))
    server.script(Reply(events=fx.openai_stream(chunks)))
    env = {"FIXTURE_KEY": KEY, **(env or {})}
    return cli("--output", output, "run", "wf.yaml", "--db", "r.db", env=env)


def test_jsonl_prints_one_event_per_delta_then_the_outcome(
    cli: Cli, ledger_target: LedgerTarget, tmp_path: Path, server: FixtureServer
) -> None:
    done = _stream_run(cli, tmp_path, server, "jsonl", CHUNKS)
    assert done.rc == 0, done.stderr
    lines = _stream_lines(done.stdout)
    assert [line["kind"] for line in lines] == ["StreamEvent"] * len(CHUNKS) + ["RunOutcome"]
    events = [line["data"] for line in lines[:-1]]
    assert [e["payload"]["text"] for e in events] == CHUNKS
    assert [e["sequence"] for e in events] == [1, 2, 3, 4, 5]
    assert {e["eventType"] for e in events} == {"text.delta"}
    outcome = lines[-1]["data"]
    assert outcome["state"] == "succeeded" and outcome["output"]["t"]["text"] == "".join(CHUNKS)
    assert server.seen[0].body["stream"] is True and len(server.seen) == 1
    stored = _inspect(cli, outcome["runId"])["streamEvents"]
    assert stored == events  # what was shown live is exactly what is durable
    [effect] = _inspect(cli, outcome["runId"])["effects"]
    assert {e["effectId"] for e in events} == {effect["effectId"]}
    ledger = ledger_target.contents(tmp_path / "r.db")
    assert outcome["runId"] in ledger and KEY not in ledger
    # In the whole stream the fragments sit where they committed: inside the model effect.
    kinds = [line["data"].get("type", line["kind"]) for line in _lines(done.stdout)]
    started, finished = kinds.index("effect.started"), kinds.index("effect.succeeded")
    assert kinds[started + 1 : finished] == ["StreamEvent"] * len(CHUNKS)


def test_json_output_stays_one_document_and_replay_copies_the_events(
    cli: Cli, tmp_path: Path, server: FixtureServer
) -> None:
    done = _stream_run(cli, tmp_path, server, "json", CHUNKS)
    assert done.rc == 0, done.stderr
    [only] = _lines(done.stdout)
    assert only["kind"] == "RunOutcome"
    run_id = only["data"]["runId"]
    source = _inspect(cli, run_id)["streamEvents"]
    assert len(source) == len(CHUNKS)
    replayed = cli("--output", "json", "replay", run_id, "--db", "r.db")
    assert replayed.rc == 0, replayed.stderr
    copied = _inspect(cli, replayed.data["runId"])["streamEvents"]
    assert [(e["sourceRunId"], e["sourceSequence"]) for e in copied] == [
        (run_id, e["sequence"]) for e in source
    ]
    assert [e["payload"] for e in copied] == [e["payload"] for e in source]
    assert len(server.seen) == 1  # the replay sent nothing


def test_killed_mid_stream_keeps_fragments_and_leaves_the_call_uncertain(
    cli: Cli, tmp_path: Path, server: FixtureServer
) -> None:
    crash = {"AGENTCTL_CRASH_AT": "stream.after_event", "AGENTCTL_CRASH_HIT": "2"}
    killed = _stream_run(cli, tmp_path, server, "jsonl", CHUNKS, crash)
    assert killed.rc == -9, killed.stderr
    runs = cli("--output", "json", "runs", "list", "--db", "r.db").data["runs"]
    run_id = runs[0]["runId"]
    kept = _inspect(cli, run_id)["streamEvents"]
    assert [e["payload"]["text"] for e in kept] == CHUNKS[:2]
    resumed = cli("--output", "json", "resume", run_id, "--db", "r.db", env={"FIXTURE_KEY": KEY})
    assert resumed.rc == 3
    after = _inspect(cli, run_id)
    [effect] = after["effects"]
    assert effect["operation"] == "openai" and effect["status"] == "uncertain"
    assert effect["effectId"] in resumed.error["error"]["message"]
    assert after["streamEvents"] == kept
    assert len(server.seen) == 1  # never resent


def test_resume_streams_too_and_an_approval_pause_keeps_the_order(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "wf.yaml").write_text(FAKE_WITH_APPROVAL)
    paused = cli("--output", "jsonl", "run", "wf.yaml", "--db", "r.db")
    assert paused.rc == 3, paused.stderr
    first = _stream_lines(paused.stdout)
    assert [line["kind"] for line in first] == ["StreamEvent", "RunOutcome"]
    assert first[0]["data"]["eventType"] == "tool_arguments.delta"
    assert json.loads(first[0]["data"]["payload"]["text"]) == {"content": "hi", "path": "out.txt"}
    run_id = first[-1]["data"]["runId"]
    approvals = cli("--output", "json", "approvals", "list", run_id, "--db", "r.db").data
    approval_id = approvals["approvals"][0]["approvalId"]
    cli("--output", "json", "approvals", "approve", approval_id, "--reason", "ok", "--db", "r.db")
    resumed = cli("--output", "jsonl", "resume", run_id, "--db", "r.db")
    assert resumed.rc == 0, resumed.stderr
    second = _stream_lines(resumed.stdout)
    assert [line["kind"] for line in second] == ["StreamEvent"] * 3 + ["RunOutcome"]
    assert [line["data"]["payload"]["text"] for line in second[:-1]] == ["all ", "three ", "words"]
    assert [line["data"]["sequence"] for line in second[:-1]] == [2, 3, 4]
    shown = _inspect(cli, run_id)
    assert len(shown["streamEvents"]) == 4
    # The fake answers in every adapter's streamed shape: its deltas beside the whole answer.
    calls = [e["result"] for e in shown["effects"] if e["result"] and "finish" in e["result"]]
    assert [c["fragments"] for c in calls] == [
        [{"index": 0, "kind": "tool_arguments", "text": '{"content": "hi", "path": "out.txt"}'}],
        [
            {"index": i, "kind": "text", "text": t}
            for i, t in enumerate(["all ", "three ", "words"])
        ],
    ]
    assert [c["droppedFragments"] for c in calls] == [0, 0]


@pytest.mark.parametrize("kind", ["anthropic", "google"])
def test_providers_without_streaming_fail_check(cli: Cli, tmp_path: Path, kind: str) -> None:
    text = _openai_workflow(9).replace("kind: openai", f"kind: {kind}")
    text = text.replace("      endpoint: http://127.0.0.1:9/v1/responses\n", "")
    (tmp_path / "wf.yaml").write_text(text)
    checked = cli("--output", "json", "check", "wf.yaml")
    assert checked.rc == 2
    assert "stream" in checked.stderr


def test_a_fragment_carrying_the_credential_is_redacted_before_it_is_kept(
    cli: Cli, tmp_path: Path, server: FixtureServer
) -> None:
    done = _stream_run(cli, tmp_path, server, "jsonl", ["the key is ", KEY])
    assert done.rc == 0, done.stderr
    shown = [line["data"] for line in _lines(done.stdout) if line["kind"] == "StreamEvent"]
    assert [e["payload"]["text"] for e in shown] == ["the key is ", "[REDACTED]"]
    stored = _inspect(cli, shown[0]["runId"])["streamEvents"]
    assert [e["payload"]["text"] for e in stored] == ["the key is ", "[REDACTED]"]


def test_a_credential_split_across_fragments_is_redacted_whole(
    cli: Cli, ledger_target: LedgerTarget, tmp_path: Path, server: FixtureServer
) -> None:
    """A tail that may begin the key is held back until the next fragment says whether it
    does; what is still held when the answer ends is kept as one more event."""
    chunks = ["the key is s", "k-stream-", "fixture-31", " and sk-str"]
    done = _stream_run(cli, tmp_path, server, "jsonl", chunks)
    assert done.rc == 0, done.stderr
    shown = [line["data"] for line in _lines(done.stdout) if line["kind"] == "StreamEvent"]
    texts = [e["payload"]["text"] for e in shown]
    assert texts == ["the key is ", "", "[REDACTED]", " and ", "sk-str"]
    stored = _inspect(cli, shown[0]["runId"])["streamEvents"]
    assert [e["payload"]["text"] for e in stored] == texts
    assert KEY not in ledger_target.contents(tmp_path / "r.db") and KEY not in done.stdout


def test_human_output_writes_the_fragments_to_stderr(cli: Cli, tmp_path: Path) -> None:
    text = FAKE_WITH_APPROVAL.replace("approval: mutations", "approval: never")
    (tmp_path / "wf.yaml").write_text(text)
    done = cli("run", "wf.yaml", "--db", "r.db")
    assert done.rc == 0, done.stderr
    # Each model call's answer on its own line: the tool call's arguments, then the text.
    assert done.stderr.endswith('{"content": "hi", "path": "out.txt"}\nall three words\n')
    assert done.stdout.startswith("run ") and "succeeded" in done.stdout.splitlines()[0]
    # A failure after a streamed answer starts its own line, as scripts look for `error:`.
    check = (
        '    - { id: v, uses: "action:check", needs: [w], with: { that: false, message: nope } }\n'
    )
    asserting = "  actions: { check: { kind: builtin.assert } }\n  tools:\n"
    failing = (text + check).replace("  tools:\n", asserting, 1)
    (tmp_path / "wf.yaml").write_text(failing)
    failed = cli("run", "wf.yaml", "--db", "r.db")
    assert failed.rc == 4, failed.stderr
    assert "\nerror: run failed: v: task v: nope" in failed.stderr
