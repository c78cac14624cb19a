"""The workflow models' core schema kept between processes (``agentctl/cli_schemacache.py``).

A process that finds a trusted stored schema validates with it instead of building the models;
it must accept, reject and report exactly what a freshly built model does. A stored schema is a
pickle, so one that anybody but the user could have written must never be loaded: the unsafe
cases below plant a pickle that would create a marker file if it were loaded.
"""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from agentctl import cli_schemacache
from tests.cli import untrusted
from tests.conftest import cli_env

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
HEAD = "apiVersion: agentctl.dev/v1\nkind: Workflow\nmetadata: { name: m }\n"
TASK = "  tasks:\n    - { id: a, uses: 'action:x' }\n"
INVALID = [
    HEAD + "spec:\n  actions: { x: { kind: builtin.assign, retries: 2 } }\n" + TASK,
    HEAD + "spec:\n  maxConcurrency: '3'\n" + TASK,
    HEAD + "spec:\n  max_concurrency: 3\n" + TASK,
    HEAD + "spec:\n  maxConcurrency: 0\n" + TASK,
    HEAD + "spec:\n  actions: { x: { kind: builtin.assign } }\n  tasks: []\n",
    HEAD + "spec:\n  tasks:\n    - { id: 'a b', uses: 'nothing' }\n",
    HEAD + "spec:\n  agents: { a: { provider: p, model: 1 } }\n" + TASK,
    HEAD + "spec:\n  policy: { egress: { allow: yes } }\n" + TASK,
    HEAD + "spec:\n  output: { verbose: 1 }\n" + TASK,
    HEAD + "spec:\n  actions: { x: { kind: builtin.assign, timeoutSeconds: -1 } }\n" + TASK,
    HEAD + "spec:\n  actions:\n    x: { kind: shell, command: [echo, 1], env: { A: 2 } }\n" + TASK,
    "apiVersion: agentctl.dev/v9\nkind: Workflow\nmetadata: { name: '' }\nspec: {}\n",
    "playbook:\n  name: old\n  steps: [ { name: s, run: 1 } ]\n",
]
PROBE = """\
import json, sys
from agentctl import cli_schemacache
from agentctl.core.dsl import Workflow, load_workflow
from agentctl.errors import ValidationError

cli_schemacache.prepare_workflow_model()
results = []
for source in json.loads(sys.stdin.read()):
    try:
        results.append({"document": load_workflow(source, "wf.yaml").document})
    except ValidationError as exc:
        results.append({"error": exc.message, "diagnostics": [d.to_json() for d in exc.diagnostics]})
print(json.dumps({"built": Workflow.__pydantic_complete__, "results": results}))
"""


def _probe(cache: Path, sources: list[str]) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE],
        input=json.dumps(sources),
        env=cli_env({"XDG_CACHE_HOME": str(cache)}),
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    found: dict[str, object] = json.loads(done.stdout)
    return found


def _check(cache: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "agentctl",
            "--output",
            "json",
            "check",
            str(EXAMPLES / "hello.yaml"),
        ],
        cwd=cwd,
        env=cli_env({"XDG_CACHE_HOME": str(cache)}),
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_stored_schema_validates_exactly_like_a_fresh_build(tmp_path: Path) -> None:
    sources = [p.read_text(encoding="utf-8") for p in sorted(EXAMPLES.glob("*.yaml"))]
    sources += INVALID
    fresh = _probe(tmp_path, sources)  # no cache yet: builds the models, then stores
    stored = tmp_path / "agentctl" / cli_schemacache.FILE_NAME
    assert stored.is_file()
    assert stat_mode(stored) == 0o600 and stat_mode(stored.parent) == 0o700
    again = _probe(tmp_path, sources)
    assert fresh["built"] is True and again["built"] is False  # the second used the store
    assert again["results"] == fresh["results"]
    results = fresh["results"]
    assert isinstance(results, list)
    assert sum("error" in r for r in results) >= len(INVALID)  # the invalid ones failed


def stat_mode(path: Path) -> int:
    return path.stat().st_mode & 0o777


def _plant(cache: Path, marker: Path, key: bytes | None = None) -> Path:
    """A private cache file holding a pickle that creates ``marker`` when loaded."""
    target = cache / "agentctl" / cli_schemacache.FILE_NAME
    return untrusted.plant(target, key or cli_schemacache.fingerprint(), marker)


def test_a_private_cache_file_is_what_gets_loaded(tmp_path: Path) -> None:
    """The control for the unsafe cases: the planted pickle does run when it is trusted."""
    marker = tmp_path / "loaded"
    _plant(tmp_path / "cache", marker)
    done = _check(tmp_path / "cache", tmp_path)
    assert done.returncode == 0, done.stderr
    assert marker.exists()
    # What it held was no schema: the check built the models and replaced the file.
    assert pickle.loads(
        (tmp_path / "cache" / "agentctl" / cli_schemacache.FILE_NAME)
        .read_bytes()
        .split(b"\n", 1)[1]
    )


@pytest.mark.parametrize("spoil", untrusted.SPOILS)
def test_a_cache_file_others_could_have_written_is_never_loaded(
    tmp_path: Path, spoil: Callable[[Path], None]
) -> None:
    untrusted.skip_unless_possible(spoil)
    marker = tmp_path / "loaded"
    target = _plant(tmp_path / "cache", marker)
    spoil(target)
    done = _check(tmp_path / "cache", tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["data"]["tasks"] == 3
    assert not marker.exists()


def test_a_schema_stored_from_other_sources_is_not_used(tmp_path: Path) -> None:
    marker = tmp_path / "loaded"
    target = _plant(tmp_path / "cache", marker, key=b"agentctl-workflow-schema-1 stale\n")
    done = _check(tmp_path / "cache", tmp_path)
    assert done.returncode == 0, done.stderr
    assert not marker.exists()
    assert target.read_bytes().startswith(cli_schemacache.fingerprint())  # rebuilt and replaced
