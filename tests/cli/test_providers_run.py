"""Real providers end to end: the CLI in a fresh directory against local servers speaking
each provider's wire format (issue 12, coordinator half).

The workflows are the bundled ``examples/providers/*.yaml`` with the local server's port put
in; the server (``tests.providers.agent_server``) runs on 127.0.0.1 in this process, counts
and records every request, and answers from the conversation it receives, so the final
answer proves the tool's result reached it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.clibackend import LedgerTarget
from tests.conftest import EXAMPLES, Cli, CliResult, StartCli
from tests.providers import fixtures as fx
from tests.providers.agent_server import AgentServer
from tests.providers.fixtures import Reply

KEY = "sk-acceptance-SECRET-51f3c9"


@dataclass(frozen=True)
class Provider:
    kind: str
    key_env: str
    key_header: str
    key_value: str  # what the header carries

    def workflow(self, server: AgentServer, ws: Path, **edits: str) -> Path:
        """The bundled example for this provider, served by ``server``, written into ``ws``."""
        text = (EXAMPLES / "providers" / f"{self.kind}.yaml").read_text(encoding="utf-8")
        text = text.replace("8765", str(server.port))
        for old, new in edits.items():
            assert text.count(old) == 1, old
            text = text.replace(old, new)
        ws.mkdir(parents=True, exist_ok=True)
        (ws / "notes.txt").write_bytes((EXAMPLES / "providers" / "notes.txt").read_bytes())
        path = ws / "wf.yaml"
        path.write_text(text, encoding="utf-8")
        return path


PROVIDERS = [
    Provider("openai", "OPENAI_API_KEY", "authorization", f"Bearer {KEY}"),
    Provider("azure_openai", "AZURE_OPENAI_API_KEY", "api-key", KEY),
    Provider("anthropic", "ANTHROPIC_API_KEY", "x-api-key", KEY),
    Provider("google", "GEMINI_API_KEY", "x-goog-api-key", KEY),
]
OPENAI = PROVIDERS[0]
each_provider = pytest.mark.parametrize("p", PROVIDERS, ids=lambda p: p.kind)
NOTES_FIRST_LINE = "Provider examples read this file through the builtin.workspace.read tool."


@pytest.fixture
def server() -> Iterator[AgentServer]:
    srv = AgentServer()
    yield srv
    srv.close()


def _run(cli: Cli, p: Provider, wf: Path, db: Path, **env: str) -> CliResult:
    return cli("--output", "json", "run", str(wf), "--db", str(db), env={p.key_env: KEY, **env})


def _files_containing(root: Path, needle: bytes) -> list[Path]:
    return [f for f in root.rglob("*") if f.is_file() and needle in f.read_bytes()]


@each_provider
def test_the_example_runs_with_the_same_output_and_the_key_stays_out_of_state(
    cli: Cli, tmp_path: Path, server: AgentServer, p: Provider
) -> None:
    wf, db = p.workflow(server, tmp_path / "ws"), tmp_path / "state" / "r.db"
    done = _run(cli, p, wf, db)
    assert done.rc == 0, done.stderr
    expected = {"path": "notes.txt", "bytes": 153, "firstLine": NOTES_FIRST_LINE}
    assert done.data["output"] == {"describe": expected}
    # Two model calls, each with the key in the provider's own header; the second carried
    # the tool's result (the answer above is computed from it by the server).
    assert [s.headers.get(p.key_header) for s in server.seen] == [p.key_value] * 2
    run_id = done.data["runId"]
    seen = cli("--output", "json", "inspect", run_id, "--db", str(db))
    assert seen.rc == 0, seen.stderr
    for text in (done.stdout, done.stderr, seen.stdout, seen.stderr):
        assert KEY not in text
    assert _files_containing(tmp_path, KEY.encode()) == []
    models = [e for e in seen.data["effects"] if e["operation"] == p.kind]
    assert [e["status"] for e in models] == ["succeeded", "succeeded"]
    # replay answers from the records: not one request more, and no key needed.
    before = len(server.seen)
    again = cli("--output", "json", "replay", run_id, "--db", str(db))
    assert again.rc == 0, again.stderr
    assert again.data["output"] == done.data["output"]
    assert len(server.seen) == before


def test_the_recorded_input_keeps_the_key_as_source_and_digest(
    cli: Cli, tmp_path: Path, server: AgentServer
) -> None:
    import hashlib

    wf, db = OPENAI.workflow(server, tmp_path / "ws"), tmp_path / "state" / "r.db"
    done = _run(cli, OPENAI, wf, db)
    assert done.rc == 0, done.stderr
    listed = cli("--output", "json", "effects", "list", done.data["runId"], "--db", str(db))
    model = next(e for e in listed.data["effects"] if e["operation"] == "openai")
    shown = cli("--output", "json", "effects", "inspect", model["effectId"], "--db", str(db))
    assert shown.rc == 0, shown.stderr
    recorded = json.dumps(shown.data)
    assert hashlib.sha256(KEY.encode()).hexdigest() in recorded
    assert "env:OPENAI_API_KEY" in recorded and KEY not in recorded


# The model each bundled example calls (its price is keyed main/<model>).
MODELS = {
    "openai": "gpt-5-mini",
    "azure_openai": "my-deployment",
    "anthropic": "claude-sonnet-4-5",
    "google": "gemini-2.5-flash",
}
# What one fixture answer (tests/providers/fixtures.py) counts, once normalized: input with
# the cache reads and writes in it, output with the reasoning in it.
# (input, cache read, cache write, output, reasoning)
ANSWER_TOKENS = {
    # input_tokens 11 (5 of them cached, 1 written to the cache); output_tokens 7 (3 reasoning)
    "openai": (11, 5, 1, 7, 3),
    "azure_openai": (11, 5, 1, 7, 3),
    # input_tokens 13 leaves out the 4 read and 2 written; output_tokens 8 has 3 thinking
    "anthropic": (19, 4, 2, 8, 3),
    # promptTokenCount 17 has the 6 cached in it, toolUsePromptTokenCount 3 is beside it;
    # candidatesTokenCount 9 leaves out the 2 thoughts
    "google": (20, 6, 0, 11, 2),
}


@each_provider
def test_usage_and_cost_are_settled_from_the_answers_each_token_once(
    cli: Cli, tmp_path: Path, server: AgentServer, p: Provider
) -> None:
    # A different rate for every kind (micro-USD per token: 3 in, 1 cache read, 2 cache
    # write, 5 out, 7 reasoning), so a token billed twice or at another kind's rate shows.
    pricing = (
        "  runtime:\n"
        "    pricing:\n"
        "      version: test\n"
        "      models:\n"
        f"        main/{MODELS[p.kind]}:\n"
        "          inputMicrousdPerMillionTokens: 3000000\n"
        "          cacheReadMicrousdPerMillionTokens: 1000000\n"
        "          cacheWriteMicrousdPerMillionTokens: 2000000\n"
        "          outputMicrousdPerMillionTokens: 5000000\n"
        "          reasoningMicrousdPerMillionTokens: 7000000\n"
        "  providers:\n"
    )
    wf = p.workflow(server, tmp_path / "ws", **{"  providers:\n": pricing})
    db = tmp_path / "state" / "r.db"
    done = _run(cli, p, wf, db)
    assert done.rc == 0, done.stderr
    seen = cli("--output", "json", "inspect", done.data["runId"], "--db", str(db)).data
    spent = seen["budget"]["usage"]
    inp, read, written, out, reasoning = ANSWER_TOKENS[p.kind]
    assert spent["providerRequests"] == 2 and spent["turns"] == 2
    # The token budgets count the normalized counters: two answers.
    assert (spent["inputTokens"], spent["outputTokens"]) == (2 * inp, 2 * out)
    assert spent["totalTokens"] == 2 * (inp + out)
    assert (spent["cacheReadTokens"], spent["cacheWriteTokens"]) == (2 * read, 2 * written)
    assert spent["reasoningTokens"] == 2 * reasoning
    per_call = (inp - read - written) * 3 + read * 1 + written * 2
    per_call += (out - reasoning) * 5 + reasoning * 7
    assert spent["costMicrousd"] == 2 * per_call
    assert "unpricedProviderRequests" not in spent
    [session] = seen["providerSessions"]
    assert session["usage"]["inputTokens"] == 2 * inp


def _agentctl_without_key(
    target: LedgerTarget, cwd: Path, *args: str, empty: bool = False
) -> subprocess.CompletedProcess[str]:
    """``args`` run with no ``OPENAI_API_KEY`` (``empty``: set to the empty text)."""
    how = target.invocation(["--output", "json", *args], cwd)
    env = {k: v for k, v in how.env.items() if k != "OPENAI_API_KEY"}
    if empty:
        env["OPENAI_API_KEY"] = ""
    return subprocess.run(how.argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("empty", [False, True], ids=["unset", "empty"])
def test_a_missing_key_exits_6_before_any_state(
    ledger_target: LedgerTarget, tmp_path: Path, server: AgentServer, empty: bool
) -> None:
    wf, db = OPENAI.workflow(server, tmp_path / "ws"), tmp_path / "state" / "r.db"
    run = ("run", str(wf), "--db", str(db))
    proc = _agentctl_without_key(ledger_target, tmp_path, *run, empty=empty)
    assert proc.returncode == 6, proc.stderr
    assert "OPENAI_API_KEY" in json.loads(proc.stderr.splitlines()[-1])["error"]["message"]
    assert not (tmp_path / "state").exists()
    assert server.seen == []


def test_resuming_a_finished_run_says_so_without_asking_for_the_key(
    cli: Cli, ledger_target: LedgerTarget, tmp_path: Path, server: AgentServer
) -> None:
    wf, db = OPENAI.workflow(server, tmp_path / "ws"), tmp_path / "state" / "r.db"
    done = _run(cli, OPENAI, wf, db)
    assert done.rc == 0, done.stderr
    resume = ("resume", done.data["runId"], "--db", str(db))
    proc = _agentctl_without_key(ledger_target, tmp_path, *resume)
    message = json.loads(proc.stderr.splitlines()[-1])["error"]["message"]
    assert "succeeded" in message and "OPENAI_API_KEY" not in message
    assert proc.returncode != 6, proc.stderr


def test_max_provider_requests_stops_the_second_call_before_it_is_sent(
    cli: Cli, tmp_path: Path, server: AgentServer
) -> None:
    budget = "  runtime:\n    budgets: { maxProviderRequests: 1 }\n  providers:\n"
    wf = OPENAI.workflow(server, tmp_path / "ws", **{"  providers:\n": budget})
    db = tmp_path / "state" / "r.db"
    done = _run(cli, OPENAI, wf, db)
    assert done.rc == 4, done.stderr
    assert "providerRequests" in done.error["error"]["message"]
    assert len(server.seen) == 1  # the tool call was asked for; the answer never was
    seen = cli("--output", "json", "inspect", done.error["error"]["runId"], "--db", str(db))
    assert seen.data["budget"]["exceeded"]["dimension"] == "providerRequests"


def test_a_429_is_retried_under_the_task_retry_policy(
    cli: Cli, tmp_path: Path, server: AgentServer
) -> None:
    retry = "uses: agent:reader\n      retry: { maxAttempts: 2 }\n"
    wf = OPENAI.workflow(server, tmp_path / "ws", **{"uses: agent:reader\n": retry})
    server.script(fx.openai_error(429, "slow down"))
    done = _run(cli, OPENAI, wf, tmp_path / "state" / "r.db")
    assert done.rc == 0, done.stderr
    assert len(server.seen) == 3  # the 429, then a fresh attempt's two calls


def test_a_redirect_is_not_followed(cli: Cli, tmp_path: Path, server: AgentServer) -> None:
    wf = OPENAI.workflow(server, tmp_path / "ws")
    server.script(Reply(status=307, headers={"Location": server.url("/elsewhere/responses")}))
    done = _run(cli, OPENAI, wf, tmp_path / "state" / "r.db")
    assert done.rc == 4, done.stderr
    assert "redirect" in done.error["error"]["message"].lower()
    assert [s.path for s in server.seen] == ["/v1/responses"]


def test_a_private_endpoint_without_allow_private_sends_nothing(
    cli: Cli, tmp_path: Path, server: AgentServer
) -> None:
    wf = OPENAI.workflow(server, tmp_path / "ws", **{", allowPrivate: true": ""})
    done = _run(cli, OPENAI, wf, tmp_path / "state" / "r.db")
    assert done.rc != 0
    assert "private" in done.error["error"]["message"].lower()
    assert server.seen == []


def test_a_dead_https_proxy_in_the_environment_changes_nothing(
    cli: Cli, tmp_path: Path, server: AgentServer
) -> None:
    wf = OPENAI.workflow(server, tmp_path / "ws")
    dead = "http://127.0.0.1:9"  # discard port: nothing listens there
    proxies = {"HTTPS_PROXY": dead, "HTTP_PROXY": dead, "ALL_PROXY": dead}
    proxies |= {k.lower(): v for k, v in proxies.items()}
    done = _run(cli, OPENAI, wf, tmp_path / "state" / "r.db", **proxies)
    assert done.rc == 0, done.stderr
    assert len(server.seen) == 2


# --------------------------------------------------------------------------- crash


ONE_CALL = {
    # One model call (no tools), so a resumed attempt makes exactly one request.
    "      tools: [read_file]\n": "",
    "with: { path: notes.txt }": 'with: { prompt: "answer" }',
}


def _wait_for_requests(server: AgentServer, count: int, proc: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 120
    while len(server.seen) < count:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the model call never reached the server"
        time.sleep(0.05)


def test_sigkill_during_a_slow_call_leaves_it_uncertain_until_reconciled(
    cli: Cli, start_cli: StartCli, ledger_target: LedgerTarget, tmp_path: Path, server: AgentServer
) -> None:
    wf, db = OPENAI.workflow(server, tmp_path / "ws", **ONE_CALL), tmp_path / "state" / "r.db"
    answer = fx.openai_text(json.dumps({"path": "p", "bytes": 1, "firstLine": "x"}))
    server.script(Reply(body=answer, delay=600), Reply(body=answer))
    run = ("--output", "json", "run", str(wf), "--db", str(db))
    proc = start_cli(*run, env={"OPENAI_API_KEY": KEY})
    _wait_for_requests(server, 1, proc)
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate()
    runs = cli("--output", "json", "runs", "list", "--db", str(db))
    run_id = runs.data["runs"][0]["runId"]
    listed = cli("--output", "json", "effects", "list", run_id, "--db", str(db)).data["effects"]
    (model,) = [e for e in listed if e["operation"] == "openai"]
    env = {"OPENAI_API_KEY": KEY}
    blocked = cli("--output", "json", "resume", run_id, "--db", str(db), env=env)
    assert blocked.rc == 3, blocked.stderr
    assert model["effectId"] in blocked.error["error"]["message"]
    assert len(server.seen) == 1  # never resent
    why = "the server log shows no answer was produced"
    reconcile = ("effects", "reconcile", model["effectId"], "--status", "not-applied")
    reconciled = cli("--output", "json", *reconcile, "--reason", why, "--db", str(db))
    assert reconciled.rc == 0, reconciled.stderr
    keyless = _agentctl_without_key(ledger_target, tmp_path, "resume", run_id, "--db", str(db))
    assert keyless.returncode == 6, keyless.stderr  # checked before the run is touched
    resumed = cli("--output", "json", "resume", run_id, "--db", str(db), env=env)
    assert resumed.rc == 0, resumed.stderr
    assert len(server.seen) == 2  # exactly one more request
    assert KEY not in resumed.stdout + blocked.stderr


def test_a_key_the_model_echoes_is_redacted_from_output_and_state(
    cli: Cli, tmp_path: Path, server: AgentServer
) -> None:
    wf, db = OPENAI.workflow(server, tmp_path / "ws", **ONE_CALL), tmp_path / "state" / "r.db"
    echoed = {"path": f"key is {KEY}", "bytes": 1, "firstLine": "x"}
    server.script(Reply(body=fx.openai_text(json.dumps(echoed))))
    done = _run(cli, OPENAI, wf, db)
    assert done.rc == 0, done.stderr
    assert done.data["output"]["describe"]["path"] == "key is [REDACTED]"
    assert _files_containing(tmp_path, KEY.encode()) == []


def test_a_key_the_model_answers_with_as_an_object_key_is_redacted_from_output_and_state(
    cli: Cli, tmp_path: Path, server: AgentServer
) -> None:
    open_schema = {**ONE_CALL, "additionalProperties: false\n  tasks:": "\n  tasks:"}
    wf, db = OPENAI.workflow(server, tmp_path / "ws", **open_schema), tmp_path / "state" / "r.db"
    echoed = {"path": "p", "bytes": 1, "firstLine": "x", KEY: "as a key", f"{KEY}-2": 2}
    server.script(Reply(body=fx.openai_text(json.dumps(echoed))))
    done = _run(cli, OPENAI, wf, db)
    assert done.rc == 0, done.stderr
    described = done.data["output"]["describe"]
    assert described["[REDACTED]"] == "as a key" and described["[REDACTED]-2"] == 2
    assert KEY not in done.stdout + done.stderr
    assert _files_containing(tmp_path, KEY.encode()) == []


def test_a_call_that_times_out_after_dispatch_is_uncertain_and_never_resent(
    cli: Cli, tmp_path: Path, server: AgentServer
) -> None:
    edits = {**ONE_CALL, "maxTurns: 3": "maxTurns: 3\n      timeoutSeconds: 20"}
    edits["uses: agent:reader\n"] = "uses: agent:reader\n      retry: { maxAttempts: 3 }\n"
    wf, db = OPENAI.workflow(server, tmp_path / "ws", **edits), tmp_path / "state" / "r.db"
    server.script(Reply(body=fx.openai_text("{}"), delay=120))
    done = _run(cli, OPENAI, wf, db)
    assert done.rc == 4, done.stderr
    assert "uncertain" in done.error["error"]["message"]
    assert len(server.seen) == 1  # the retry policy does not resend an uncertain call
    run_id = done.error["error"]["runId"]
    listed = cli("--output", "json", "effects", "list", run_id, "--db", str(db)).data["effects"]
    assert [e["status"] for e in listed if e["operation"] == "openai"] == ["uncertain"]


def test_a_call_cut_at_the_tasks_deadline_names_its_provider_in_whole_seconds(
    cli: Cli, tmp_path: Path, server: AgentServer
) -> None:
    # The call gets what is left of the task's 2 s (1.99998… s): its error used to say that
    # float, and not which provider it was waiting for.
    task = 'with: { prompt: "answer" }\n      timeoutSeconds: 2'
    edits = {**ONE_CALL, "with: { path: notes.txt }": task}
    wf, db = OPENAI.workflow(server, tmp_path / "ws", **edits), tmp_path / "state" / "r.db"
    server.script(Reply(body=fx.openai_text("{}"), delay=120))
    done = _run(cli, OPENAI, wf, db)
    assert done.rc == 4, done.stderr
    listed = cli(
        "--output", "json", "effects", "list", done.error["error"]["runId"], "--db", str(db)
    )
    [effect] = listed.data["effects"]
    assert effect["status"] == "uncertain"
    assert effect["error"] == "provider main: effect timed out after 2 s", effect["error"]


def test_a_header_secret_reaches_the_server_and_is_recorded_as_its_digest(
    cli: Cli, tmp_path: Path, server: AgentServer
) -> None:
    org = "org-SECRET-77e1"
    edits = {
        "    approval: never\n": "    approval: never\n    environmentAllowlist: [ORG_ID]\n",
        "      kind: openai\n": "      kind: openai\n      headers: { OpenAI-Organization: { env: ORG_ID } }\n",
    }
    wf, db = OPENAI.workflow(server, tmp_path / "ws", **edits), tmp_path / "state" / "r.db"
    done = _run(cli, OPENAI, wf, db, ORG_ID=org)
    assert done.rc == 0, done.stderr
    assert [s.headers.get("openai-organization") for s in server.seen] == [org, org]
    assert _files_containing(tmp_path, org.encode()) == []
    assert org not in done.stdout + done.stderr


PLAIN_AGENT = """\
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: { name: plain }
spec:
  policy:
    approval: never
    networkAllowlist: [127.0.0.1]
    network: { allowedPorts: [PORT], allowPrivate: true }
  runtime:
    pricing:
      version: test
      models:
        openai/m1: { inputMicrousdPerMillionTokens: 1000000, outputMicrousdPerMillionTokens: 1000000 }
  providers:
    main: { kind: openai, endpoint: "http://127.0.0.1:PORT/v1/responses" }
  agents:
    a: { provider: main, model: m1, instructions: Answer. }
  tasks:
    - { id: ask, uses: "agent:a", with: { prompt: hello } }
"""


def test_a_text_answer_reports_its_usage_and_cost(
    cli: Cli, tmp_path: Path, server: AgentServer
) -> None:
    wf = tmp_path / "wf.yaml"
    wf.write_text(PLAIN_AGENT.replace("PORT", str(server.port)))
    done = _run(cli, OPENAI, wf, tmp_path / "state" / "r.db")
    assert done.rc == 0, done.stderr
    answer = done.data["output"]["ask"]
    assert answer["text"] == "done: hello"
    # 11 in (5 cache read and 1 cache write among them) + 7 out (3 reasoning among them),
    # every kind at 1 µUSD per token: each token once, 18 (not 27, with the parts again).
    assert answer["usage"]["inputTokens"] == 11 and answer["usage"]["costMicrousd"] == 18


def test_agentctl_cancel_during_a_call_lets_it_finish_and_sends_nothing_more(
    cli: Cli, start_cli: StartCli, tmp_path: Path, server: AgentServer
) -> None:
    # `agentctl cancel` is honoured at the next boundary (spec/cli.md §6): the call in flight
    # is answered and recorded, and the agent's next step (its tool call) never starts. The
    # answer waits until `cancel` returned: a fixed delay raced the two CLI processes below,
    # and an answer sent first let the run finish before the cancel landed.
    wf, db = OPENAI.workflow(server, tmp_path / "ws"), tmp_path / "state" / "r.db"
    ask, cancelled = fx.openai_tool_call("read_file", {"path": "notes.txt"}), threading.Event()
    server.script(Reply(body=ask, release=cancelled), Reply(body=fx.openai_text("{}")))
    run = ("--output", "json", "run", str(wf), "--db", str(db))
    proc = start_cli(*run, env={"OPENAI_API_KEY": KEY})
    _wait_for_requests(server, 1, proc)
    run_id = cli("--output", "json", "runs", "list", "--db", str(db)).data["runs"][0]["runId"]
    asked = cli("--output", "json", "cancel", run_id, "--db", str(db))
    assert asked.rc == 0, asked.stderr
    cancelled.set()
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert json.loads(out)["data"]["state"] == "cancelled"
    listed = cli("--output", "json", "effects", "list", run_id, "--db", str(db)).data["effects"]
    assert [(e["operation"], e["status"]) for e in listed] == [("openai", "succeeded")]
    assert len(server.seen) == 1


# An answer that came back — so the provider billed it — but that no task can take.
UNUSABLE = {
    "openai": fx.openai_response(
        [], status="failed", error={"code": "invalid_prompt", "message": "refused"}
    ),
    "anthropic": fx.anthropic_message([], "pause_turn"),
    "google": fx.gemini_response([], "MALFORMED_FUNCTION_CALL"),
}


@pytest.mark.parametrize("p", [x for x in PROVIDERS if x.kind in UNUSABLE], ids=lambda p: p.kind)
def test_an_answer_that_fails_the_call_still_counts_what_it_used(
    cli: Cli, tmp_path: Path, server: AgentServer, p: Provider
) -> None:
    """The tokens of an answer that fails its call definitively are spent all the same: the
    budget counts them (they used to settle as none), and its limits see them."""
    wf = p.workflow(server, tmp_path / "ws")
    db = tmp_path / "state" / "r.db"
    server.script(Reply(body=UNUSABLE[p.kind]))
    done = _run(cli, p, wf, db)
    assert done.rc == 4, done.stderr
    said = {"openai": "refused", "anthropic": "pause_turn", "google": "MALFORMED_FUNCTION_CALL"}
    assert said[p.kind] in done.error["error"]["message"]
    seen = cli("--output", "json", "inspect", done.error["error"]["runId"], "--db", str(db)).data
    spent = seen["budget"]["usage"]
    inp, _read, _written, out, _reasoning = ANSWER_TOKENS[p.kind]
    assert spent["providerRequests"] == 1 and len(server.seen) == 1
    assert (spent["inputTokens"], spent["outputTokens"]) == (inp, out)
    assert spent["totalTokens"] == inp + out
