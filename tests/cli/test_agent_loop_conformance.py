"""The agent loop as a user's acceptance script sees it (spec/dsl.md §5, §8), CLI in a tmp dir.

- the user message of a `with` without a string `prompt` is the compact JSON text of `with`
  (sorted keys, non-ASCII kept), so the fake provider answers `fake: {"a":1}`;
- `usageLimit.maxInputTokens` / `maxOutputTokens` bound the tokens an attempt's answers
  report, checked after each answer (equality allowed);
- an answer that stops at the token limit (finish `max_tokens`) fails the task, it is not
  taken as the agent's output.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli.test_providers_run import PLAIN_AGENT
from tests.conftest import Cli
from tests.providers import fixtures as fx
from tests.providers.agent_server import AgentServer
from tests.providers.fixtures import Reply

FAKE = """\
apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: { name: loop }
spec:
  policy: { approval: never }
  providers: { sim: { kind: fake } }
  tools:
    peek: { kind: builtin.workspace.read, description: read, capability: filesystem.read,
      risk: low, effectClass: observe, idempotency: idempotent, retrySafe: true,
      timeoutSeconds: 5, outputSchema: { type: object },
      inputSchema: { type: object, properties: { path: { type: string } }, required: [path],
        additionalProperties: false } }
  agents:
    reader: { provider: sim, model: m, instructions: go, tools: [peek],
      usageLimit: { maxInputTokens: 1 }, providerOptions: { toolInput: { path: notes.txt } } }
    single: { provider: sim, model: m, instructions: go, usageLimit: { maxOutputTokens: 1 } }
  tasks:
    - { id: limited, uses: "agent:reader", with: { prompt: read }, failure: continue }
    - { id: within, uses: "agent:single", with: { z: [1, 2], a: "é x", n: 1 } }
"""


@pytest.fixture
def server() -> Iterator[AgentServer]:
    srv = AgentServer()
    yield srv
    srv.close()


def _tasks(cli: Cli, run_id: str, db: Path) -> dict[str, dict[str, object]]:
    seen = cli("--output", "json", "inspect", run_id, "--db", str(db))
    assert seen.rc == 0, seen.stderr
    return {t["taskId"]: t for t in seen.data["tasks"]}


def test_usage_limit_and_the_json_prompt_of_a_fake_agent(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("hi\n", encoding="utf-8")
    wf = tmp_path / "wf.yaml"
    wf.write_text(FAKE, encoding="utf-8")
    db = tmp_path / "state" / "r.db"
    done = cli("--output", "json", "run", str(wf), "--db", str(db), cwd=tmp_path)
    assert done.rc == 4, done.stderr
    tasks = _tasks(cli, done.error["error"]["runId"], db)
    # Two answers of one input token each: the second passes maxInputTokens 1.
    assert tasks["limited"]["state"] == "failed"
    assert "usageLimit.maxInputTokens (1)" in str(tasks["limited"]["error"])
    # One answer of one output token is within maxOutputTokens 1.
    assert tasks["within"]["state"] == "succeeded"
    output = tasks["within"]["output"]
    assert isinstance(output, dict)
    assert output["text"] == 'fake: {"a":"é x","n":1,"z":[1,2]}'


def test_an_answer_cut_at_max_tokens_fails_the_task(
    cli: Cli, tmp_path: Path, server: AgentServer
) -> None:
    wf = tmp_path / "wf.yaml"
    wf.write_text(PLAIN_AGENT.replace("PORT", str(server.port)), encoding="utf-8")
    server.script(Reply(body=fx.openai_max_tokens("cut")))
    db = tmp_path / "state" / "r.db"
    done = cli("--output", "json", "run", str(wf), "--db", str(db), env={"OPENAI_API_KEY": "sk-x"})
    assert done.rc == 4, done.stderr
    assert "max_tokens" in done.error["error"]["message"]
    assert len(server.seen) == 1
    tasks = _tasks(cli, done.error["error"]["runId"], db)
    assert tasks["ask"]["state"] == "failed" and tasks["ask"]["output"] is None


ECHO_TOOL = """  tools:
    note: { kind: builtin.echo, description: echo, capability: internal, risk: low,
      effectClass: pure, idempotency: pure,
      inputSchema: { type: object, properties: { x: { type: string } }, required: [x],
        additionalProperties: false } }
"""


def test_a_pure_tool_call_whose_id_the_model_repeats_is_recorded_each_time(
    cli: Cli, tmp_path: Path, server: AgentServer
) -> None:
    # Gemini sends no call ids (each answer's first call is call-1); the second echo call
    # under the same key used to be dropped from the record without a word.
    text = PLAIN_AGENT.replace("PORT", str(server.port)).replace(
        "  agents:", ECHO_TOOL + "  agents:"
    )
    (tmp_path / "wf.yaml").write_text(
        text.replace("instructions: Answer. }", "instructions: Answer., tools: [note] }"),
        encoding="utf-8",
    )
    server.script(
        Reply(body=fx.openai_tool_call("note", {"x": "one"}, "c1")),
        Reply(body=fx.openai_tool_call("note", {"x": "two"}, "c1")),
        Reply(body=fx.openai_text("noted")),
    )
    db = tmp_path / "r.db"
    done = cli(
        "--output", "json", "run", "wf.yaml", "--db", str(db), env={"OPENAI_API_KEY": "sk-x"}
    )
    assert done.rc == 0, done.stderr
    seen = cli("--output", "json", "inspect", done.data["runId"], "--db", str(db)).data
    calls = [(c["callId"], c["status"], c["input"]["x"]) for c in seen["toolCalls"]]
    assert calls == [("c1", "succeeded", "one"), ("c1", "succeeded", "two")]
