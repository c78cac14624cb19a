"""A ``keyed`` MCP call sends its effect id as ``params._meta["agentctl.dev/idempotency-key"]``
(the original's MCP page); any other declared idempotency sends no ``_meta`` at all. The
example server built from the official ``mcp`` package records each call's ``_meta`` as it
parsed it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.mcp_server import NotesServer
from tests.cli.test_mcp import AGENT, _workflow, server
from tests.conftest import Cli

__all__ = ["server"]  # the example server fixture of test_mcp, started per test
KEY = "agentctl.dev/idempotency-key"


def _effects(cli: Cli, run_id: str) -> list[dict[str, str]]:
    done = cli("--output", "json", "effects", "list", run_id)
    assert done.rc == 0, done.stderr
    return [e for e in done.data["effects"] if e["operation"] == "mcp.call"]


@pytest.mark.parametrize("declared", ["keyed", "idempotent", None])
def test_only_a_keyed_mcp_call_sends_its_effect_id_as_the_idempotency_key(
    cli: Cli, tmp_path: Path, server: NotesServer, declared: str | None
) -> None:
    wf = _workflow(tmp_path, server)
    if declared is not None:
        text = wf.read_text(encoding="utf-8")
        wf.write_text(
            text.replace("kind: mcp.call }", f"kind: mcp.call, idempotency: {declared} }}")
        )
    done = cli("--output", "json", "run", "wf.yaml")
    assert done.rc == 0, done.stderr
    [effect] = _effects(cli, done.data["runId"])
    assert effect["idempotency"] == (declared or "unknown")
    [seen] = server.metas()
    assert seen["tool"] == "word_count"
    if declared == "keyed":
        assert seen["meta"] == {KEY: effect["effectId"]}  # == its idempotencyKey
        assert effect["idempotencyKey"] == effect["effectId"]
    else:
        assert seen["meta"] == {}


def test_an_agents_keyed_mcp_tool_sends_its_call_effect_id(
    cli: Cli, tmp_path: Path, server: NotesServer
) -> None:
    text = AGENT.format(
        port=server.port, url=server.url, tool_input='{ text: "one two three" }'
    ).replace("idempotency: idempotent", "idempotency: keyed")
    (tmp_path / "agent.yaml").write_text(text, encoding="utf-8")
    done = cli("--output", "json", "run", "agent.yaml")
    assert done.rc == 0, done.stderr
    [effect] = _effects(cli, done.data["runId"])
    assert effect["idempotency"] == "keyed"
    assert server.metas() == [{"tool": "word_count", "meta": {KEY: effect["effectId"]}}]
