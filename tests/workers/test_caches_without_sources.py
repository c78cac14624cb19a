"""An installation whose sources cannot be read (``.pyc`` files only) has no key for the
schema caches: the worker's wire schemas and the CLI's workflow schema are then built as
pydantic builds them, and nothing is stored. A cache only ever saves time; before this, the
missing source's ``os.stat`` error ended the worker (exit 1) and the command."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

WORKER_SIDE = """
from pathlib import Path
from agentctl.mailbox import wirecache
from agentctl.mailbox.messages import Hello
wirecache._PACKAGE = Path("/nonexistent/agentctl")
wirecache.prepare_wire_models()
print(Hello.model_validate_json('{"type": "hello", "v": 1, "pid": 7}').pid)
"""

CLI_SIDE = """
import sys
from pathlib import Path
import agentctl.cli_schemacache as cache
cache._PACKAGE = Path("/nonexistent/agentctl")
sys.argv = ["agentctl", "check", sys.argv[1]]
from agentctl.entry import main
main()
"""

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "hello.yaml"


def _run(code: str, cache: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "XDG_CACHE_HOME": str(cache)}
    argv = [sys.executable, "-c", code, *args]
    return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120)


def test_a_worker_without_readable_sources_builds_its_models_and_stores_nothing(
    tmp_path: Path,
) -> None:
    done = _run(WORKER_SIDE, tmp_path / "cache")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["7"]
    assert not (tmp_path / "cache" / "agentctl" / "wire-schemas.pickle").exists()


def test_check_without_readable_sources_validates_and_stores_no_schema(tmp_path: Path) -> None:
    workflow = tmp_path / "hello.yaml"
    workflow.write_text(EXAMPLE.read_text())
    done = _run(CLI_SIDE, tmp_path / "cache", str(workflow))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "cache" / "agentctl" / "workflow-schema.pickle").exists()
