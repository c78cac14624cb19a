"""What a worker takes from where it runs: never the Python files of the directory a run
starts from (a cloned repository's `signal.py`, `selectors.py`, `mcp.py`: they would run as
agentctl, before any policy, spec/cli.md §12); the user's umask, for the files it creates."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

# Shadows the stdlib module, notes that it ran, then hands the real one over.
PLANTED = """\
import importlib, os, sys
here = os.path.dirname(os.path.abspath(__file__))
open(os.path.join(here, "PLANTED_CODE_RAN"), "w").write(str(os.getpid()))
del sys.modules["signal"]
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
sys.modules["signal"] = importlib.import_module("signal")
"""

WORKFLOW = """\
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: { name: planted }
spec:
  policy: { approval: never, writableRoots: [out] }
  actions: { save: { kind: builtin.write } }
  tasks:
    - { id: t, uses: "action:save", with: { path: out/a.txt, content: hello } }
"""


def test_a_python_file_in_the_working_directory_is_not_imported_by_workers(
    tmp_path: Path,
) -> None:
    (tmp_path / "signal.py").write_text(PLANTED, encoding="utf-8")
    (tmp_path / "wf.yaml").write_text(WORKFLOW, encoding="utf-8")
    # The coordinator as the installed `agentctl` runs (-P: its script's directory, not the
    # current one, is on its path); the worker it starts is what is under test.
    argv = [sys.executable, "-P", "-m", "agentctl", "run", "wf.yaml", "--db", "r.db"]
    ran = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert ran.returncode == 0, ran.stderr
    assert (tmp_path / "out" / "a.txt").read_text(encoding="utf-8") == "hello"
    assert not (tmp_path / "PLANTED_CODE_RAN").exists()


def _run_under_umask(root: Path, umask: int) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-P", "-m", "agentctl", "run", "wf.yaml", "--db", "r.db"]
    return subprocess.run(
        argv,
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=lambda: os.umask(umask),  # the user's umask, inherited by the worker
    )


def test_a_new_workspace_file_is_created_under_the_users_umask(tmp_path: Path) -> None:
    # A worker writes a new file as any program would, 0666 less the umask: a private 077
    # keeps what a workflow writes private. (Not a fixed 0644.)
    for umask, expected in ((0o077, 0o600), (0o022, 0o644)):
        root = tmp_path / f"u{umask:o}"
        root.mkdir()
        (root / "wf.yaml").write_text(WORKFLOW, encoding="utf-8")
        ran = _run_under_umask(root, umask)
        assert ran.returncode == 0, ran.stderr
        assert stat.S_IMODE((root / "out" / "a.txt").stat().st_mode) == expected
