"""``agentctl providers smoke-openai --live``: one bounded live request to the Responses API.

Against a 127.0.0.1 server that answers with the documented Responses shapes (the fixture
builders are parsed with the official ``openai`` SDK in tests/providers): the request goes
out once with the key as a bearer token, the answer comes back as ``LiveProviderSmoke``;
without ``--live`` nothing is sent (exit 2); without a key nothing is sent (exit 6); an
error answer is exit 6 and never shows the key. No database is ever created.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.clibackend import LedgerTarget
from tests.conftest import Cli, CliResult
from tests.providers.fixtures import FixtureServer, Reply, openai_error, openai_text

KEY = "sk-smoke-test-0123456789"
pytestmark = pytest.mark.sqlite_only(reason="the smoke opens no database of either kind")


def _endpoint(server: FixtureServer) -> str:
    return server.url("/v1/responses")


def _smoke(cli: Cli, *args: str, endpoint: str, json_output: bool = True) -> CliResult:
    """``providers smoke-openai ARGS --endpoint ENDPOINT`` with the test key set."""
    head = ["--output", "json"] if json_output else []
    argv = [*head, "providers", "smoke-openai", *args, "--endpoint", endpoint]
    return cli(*argv, env={"OPENAI_API_KEY": KEY})


def test_one_request_is_sent_and_its_answer_reported(
    cli: Cli, tmp_path: Path, server: FixtureServer
) -> None:
    server.script(Reply(body=openai_text("ok")))
    done = _smoke(cli, "--live", "--model", "gpt-smoke", endpoint=_endpoint(server))
    assert done.rc == 0, done.stderr
    envelope = json.loads(done.stdout)
    assert envelope["kind"] == "LiveProviderSmoke"
    data = envelope["data"]
    assert data["ok"] is True and data["provider"] == "openai" and data["model"] == "gpt-smoke"
    assert data["text"] == "ok" and data["finish"] == "complete"
    assert data["usage"]["inputTokens"] == 11 and data["usage"]["outputTokens"] == 7
    assert isinstance(data["latencyMs"], int)
    assert len(server.seen) == 1
    seen = server.seen[0]
    assert (seen.method, seen.path) == ("POST", "/v1/responses")
    assert seen.headers["authorization"] == f"Bearer {KEY}"
    assert seen.body["model"] == "gpt-smoke"
    assert seen.body["max_output_tokens"] <= 256
    assert KEY not in done.stdout + done.stderr
    assert not (tmp_path / ".agentctl").exists()


def test_a_reply_that_repeats_the_key_shows_it_redacted(cli: Cli, server: FixtureServer) -> None:
    server.script(Reply(body=openai_text(f"your key is {KEY}.")))
    for json_output in (True, False):
        done = _smoke(cli, "--live", endpoint=_endpoint(server), json_output=json_output)
        assert done.rc == 0, done.stderr
        assert KEY not in done.stdout + done.stderr
        assert "your key is [REDACTED]." in done.stdout
        server.script(Reply(body=openai_text(f"your key is {KEY}.")))


def test_human_output_names_the_model_and_the_reply(cli: Cli, server: FixtureServer) -> None:
    server.script(Reply(body=openai_text("ok")))
    done = _smoke(cli, "--live", endpoint=_endpoint(server), json_output=False)
    assert done.rc == 0, done.stderr
    assert done.stdout.startswith("openai gpt-5.6: ok (complete")
    assert "reply: ok" in done.stdout


def test_without_live_nothing_is_sent(cli: Cli, tmp_path: Path, server: FixtureServer) -> None:
    server.script(Reply(body=openai_text("ok")))
    done = _smoke(cli, endpoint=_endpoint(server))
    assert done.rc == 2
    assert "--live" in done.error["error"]["message"]
    assert server.seen == []
    assert not (tmp_path / ".agentctl").exists()


def test_a_missing_key_is_exit_6_and_sends_nothing(
    ledger_target: LedgerTarget, tmp_path: Path, server: FixtureServer
) -> None:
    args = ["--output", "json", "providers", "smoke-openai", "--live"]
    how = ledger_target.invocation([*args, "--endpoint", _endpoint(server)], tmp_path)
    for env in (
        {k: v for k, v in how.env.items() if k != "OPENAI_API_KEY"},
        {**how.env, "OPENAI_API_KEY": ""},
    ):
        proc = subprocess.run(how.argv, cwd=tmp_path, env=env, capture_output=True, text=True)
        assert proc.returncode == 6, proc.stderr
        error = json.loads(proc.stderr)["error"]
        assert error["exitCode"] == 6 and "OPENAI_API_KEY" in error["message"]
    assert server.seen == []


def test_an_error_answer_is_exit_6_without_the_key(cli: Cli, server: FixtureServer) -> None:
    server.script(openai_error(401, f"Incorrect API key provided: {KEY}"))
    done = _smoke(cli, "--live", endpoint=_endpoint(server))
    assert done.rc == 6
    message = done.error["error"]["message"]
    assert "HTTP 401" in message and KEY not in done.stderr
    assert len(server.seen) == 1


@pytest.mark.parametrize(
    "endpoint", ["ftp://example.com/v1/responses", "http://127.0.0.1:1/v1/chat/completions"]
)
def test_a_bad_endpoint_is_a_usage_error(cli: Cli, endpoint: str) -> None:
    done = _smoke(cli, "--live", endpoint=endpoint, json_output=False)
    assert done.rc == 2, done.stderr
    assert "--endpoint" in done.stderr


def test_a_refused_redirect_names_the_provider_once(cli: Cli, server: FixtureServer) -> None:
    """The egress layer's refusal already says which provider it was; the command adds no
    second ``provider openai:`` in front of it."""
    server.script(Reply(status=302, headers={"Location": "http://example.com/"}))
    done = _smoke(cli, "--live", endpoint=_endpoint(server))
    assert done.rc == 3, done.stderr
    message = done.error["error"]["message"]
    assert "redirects are never followed" in message
    assert message.count("provider openai:") == 1, message


def test_usage_is_reported_as_a_run_settles_it(cli: Cli, server: FixtureServer) -> None:
    """A negative or non-integer counter in the answer counts 0, as the budget ledger of a run
    settles the same answer: the smoke never reports a usage a run would not record."""
    body = openai_text("ok")
    assert isinstance(body, dict)
    body["usage"] = {
        "input_tokens": -3,
        "output_tokens": "7",
        "output_tokens_details": {"reasoning_tokens": 2},
    }
    server.script(Reply(body=body))
    done = _smoke(cli, "--live", endpoint=_endpoint(server))
    assert done.rc == 0, done.stderr
    assert done.data["usage"] == {
        "inputTokens": 0,
        "outputTokens": 0,
        "reasoningTokens": 2,
        "cacheReadTokens": 0,
        "cacheWriteTokens": 0,
    }
