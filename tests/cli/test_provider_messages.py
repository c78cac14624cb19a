"""What a user reads about a model call that was refused or lost.

- The refusal after an answer overshot ``maxTotalTokens`` names the total the refused call
  would reach (usage + reserved + its reservation, spec/cli.md §7). Before, the next task
  failed with ``(limit 300, would reach 1000)``: 1000 was the first answer's usage alone.
- A call the run's ``--timeout-seconds`` cut short is ``uncertain`` and says why (its
  ``error`` was empty).
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli.test_providers_run import KEY, ONE_CALL, OPENAI, server
from tests.conftest import Cli
from tests.providers import fixtures as fx
from tests.providers.agent_server import AgentServer
from tests.providers.fixtures import Reply

__all__ = ["server"]  # the fixture, imported for pytest

ANSWER = json.dumps({"path": "p", "bytes": 1, "firstLine": "x"})
SECOND_TASK = (
    'with: { prompt: "answer" }\n'
    "    - id: again\n"
    "      uses: agent:reader\n"
    "      needs: [describe]\n"
    '      with: { prompt: "again" }\n'
)


def test_the_refusal_after_an_overshoot_names_the_total_the_call_would_reach(
    cli: Cli, tmp_path: Path, server: AgentServer
) -> None:
    edits = {
        **ONE_CALL,
        "maxOutputTokens: 1024": "maxOutputTokens: 100",
        "  providers:\n": "  runtime: { budgets: { maxTotalTokens: 300 } }\n  providers:\n",
    }
    wf = OPENAI.workflow(server, tmp_path / "ws", **edits)
    text = wf.read_text(encoding="utf-8").replace('with: { prompt: "answer" }\n', SECOND_TASK)
    wf.write_text(text, encoding="utf-8")
    big = fx.openai_text(ANSWER)
    big["usage"] = fx.openai_usage(inp=500, out=500, reasoning=0, cached=0)
    server.script(Reply(body=big))
    db = tmp_path / "state" / "r.db"
    failed = cli("--output", "json", "run", str(wf), "--db", str(db), env={OPENAI.key_env: KEY})
    assert failed.rc == 4, failed.stderr
    assert len(server.seen) == 1  # the second call was refused before it was sent
    message = failed.error["error"]["message"]
    run_id = failed.error["error"]["runId"]
    seen = cli("--output", "json", "inspect", run_id, "--db", str(db)).data
    assert seen["budget"]["usage"]["totalTokens"] == 1000
    over = seen["budget"]["exceeded"]
    # What the refused call would have reached: the usage and its own reservation.
    assert over["dimension"] == "totalTokens" and over["attempted"] > 1000, over
    assert f"(limit 300, would reach {over['attempted']})" in message


def test_a_call_cut_short_by_timeout_seconds_says_why_it_is_uncertain(
    cli: Cli, tmp_path: Path, server: AgentServer
) -> None:
    wf, db = OPENAI.workflow(server, tmp_path / "ws", **ONE_CALL), tmp_path / "state" / "r.db"
    server.script(Reply(body=fx.openai_text(ANSWER), delay=600))
    run = ("--output", "json", "run", str(wf), "--db", str(db), "--timeout-seconds", "2")
    stopped = cli(*run, env={OPENAI.key_env: KEY})
    assert stopped.rc == 130, stopped.stderr
    run_id = stopped.data["runId"]
    [model] = cli("--output", "json", "inspect", run_id, "--db", str(db)).data["effects"]
    assert model["status"] == "uncertain"
    assert "stopped while it was in flight (--timeout-seconds" in model["error"], model
