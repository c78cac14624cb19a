"""Files an agent's ``builtin.workspace.write`` tool writes are artifacts, as an action's are.

spec/dsl.md §2: each ``path`` of a confirmed workspace-mutation effect result under a writable
root is ingested; spec/cli.md §8: artifacts are reported by successful built-in workspace
mutations — a tool call's write as much as a ``builtin.write`` action's. So the tool's file
gets a reference for its task (its lease released by the completion), counts against
``maxArtifactBytes``, and is verified where action artifacts are (``replay``).
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

from tests.cli.tool_writer import tool_writer
from tests.conftest import Cli

FLOW = tool_writer(
    "toolart",
    """\
  actions:
    save: { kind: builtin.write }
  tasks:
    - { id: viaTool, uses: "agent:w", with: { prompt: go } }
    - { id: viaAction, uses: "action:save", with: { path: out/a.txt, content: direct } }
""",
)
TOOLED = "sha256:" + hashlib.sha256(b"tooled").hexdigest()


def _run(cli: Cli, tmp_path: Path, flow: str) -> tuple[int, str]:
    (tmp_path / "wf.yaml").write_text(flow, encoding="utf-8")
    got = cli("--output", "json", "run", "wf.yaml", "--db", "r.db")
    run_id = got.data["runId"] if got.rc == 0 else got.error["error"]["runId"]
    return got.rc, run_id


def _inspect(cli: Cli, run_id: str) -> Any:
    got = cli("--output", "json", "inspect", run_id, "--db", "r.db")
    assert got.rc == 0, got.stderr
    return got.data


def test_a_tool_write_is_ingested_like_an_action_write(cli: Cli, tmp_path: Path) -> None:
    rc, run_id = _run(cli, tmp_path, FLOW)
    assert rc == 0
    data = _inspect(cli, run_id)
    refs = {a["taskId"]: a for a in data["artifacts"]}
    assert set(refs) == {"viaTool", "viaAction"}
    tool = refs["viaTool"]
    assert (tool["path"], tool["digest"], tool["sizeBytes"]) == ("out/t.txt", TOOLED, 6)
    assert tool["mediaType"] == "text/plain" and tool["attempt"] == 1
    assert data["budget"]["usage"]["artifactBytes"] == 12  # both files metered
    stats = cli("--output", "json", "db", "stats", "--db", "r.db").data
    assert stats["artifactIngests"] == 0  # the completion released the tool write's lease too
    listed = cli(
        "--output",
        "json",
        "artifacts",
        "list",
        "--run",
        run_id,
        "--task",
        "viaTool",
        "--db",
        "r.db",
    )
    assert [r["digest"] for r in listed.data["references"]] == [TOOLED]
    verified = cli("--output", "json", "artifacts", "verify", TOOLED, "--db", "r.db")
    assert verified.rc == 0 and verified.data["valid"] is True


def test_max_artifact_bytes_bounds_a_tool_write(cli: Cli, tmp_path: Path) -> None:
    limited = "  runtime: { budgets: { maxArtifactBytes: 5 } }\n  policy:"
    budgeted = FLOW.replace("  policy:", limited, 1).split("    - { id: viaAction")[0]
    rc, run_id = _run(cli, tmp_path, budgeted)
    assert rc == 4  # the tool's 6 bytes exceed the limit: its task and the run fail
    data = _inspect(cli, run_id)
    states = {t["taskId"]: t for t in data["tasks"]}
    assert states["viaTool"]["state"] == "failed"
    assert "artifactBytes" in states["viaTool"]["error"]
    assert (tmp_path / "out" / "t.txt").read_text() == "tooled"  # the write itself happened
    [write] = [e for e in data["effects"] if e["taskId"] == "viaTool" and "write" in e["operation"]]
    assert write["status"] == "succeeded"  # ... so its effect stays succeeded
    assert data["budget"]["exceeded"]["dimension"] == "artifactBytes"
    assert [a for a in data["artifacts"] if a["taskId"] == "viaTool"] == []


def test_replay_verifies_a_tool_written_artifact(cli: Cli, tmp_path: Path) -> None:
    rc, run_id = _run(cli, tmp_path, FLOW)
    assert rc == 0
    blob = tmp_path / "artifacts" / "sha256" / TOOLED[7:9] / TOOLED[7:]
    os.chmod(blob, 0o600)
    blob.write_bytes(b"corrupted")
    got = cli("--output", "json", "replay", run_id, "--db", "r.db")
    assert got.rc == 5, got.stderr  # the recorded tool artifact no longer matches its digest
    assert TOOLED in got.stderr
