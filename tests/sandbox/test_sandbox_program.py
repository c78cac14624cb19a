"""find_program held against the spawn a run makes: it finds what ``spawn_child`` starts.

Each case looks a command up, then starts it with ``spawn_child`` the way the shell executor
does (cleared environment plus the action's PATH, the action's cwd): found ⇔ started, and the
script found is the script that ran (it prints the path it was executed by).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import trio

from agentctl.errors import PolicyDeniedError
from agentctl.sandbox.program import find_program, process_cwd
from agentctl.sandbox.spawn import spawn_child


def _script(path: Path, mode: int = 0o755) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text('#!/bin/sh\necho "$0"\n')
    path.chmod(mode)


def _spawned(command: str, cwd: Path, path: str | None) -> str | None:
    """What the started command printed (its own path), or None if it could not start."""
    env = {} if path is None else {"PATH": path}
    try:
        child = spawn_child([command], env=env, cwd=str(cwd), piped_stdin=False)
    except OSError:
        return None
    trio.run(child.wait)
    printed = os.read(child.stdout_fd, 4096).decode().strip()
    child.close()
    return printed


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    _script(tmp_path / "ws" / "run.sh")
    _script(tmp_path / "ws" / "plain.sh", mode=0o644)
    _script(tmp_path / "ws" / "bin" / "tool")
    _script(tmp_path / "noexec" / "tool", mode=0o644)
    (tmp_path / "ws" / "dir").mkdir()
    return tmp_path


CASES = [
    ("./run.sh", None, "found"),
    ("run.sh", None, "not_found"),  # a bare name is never looked up in the cwd by default
    ("./plain.sh", None, "not_executable"),
    ("./dir", None, "not_executable"),
    ("./absent.sh", None, "not_found"),
    ("tool", "bin", "found"),  # a relative PATH entry is relative to the process's cwd
    ("tool", "{tmp}/noexec:{tmp}/ws/bin", "found"),  # exec skips what it may not execute
    ("tool", "{tmp}/noexec", "not_executable"),
    ("tool", None, "not_found"),
    ("sh", None, "found"),  # the system default PATH of a cleared environment
]


@pytest.mark.parametrize(("command", "path", "status"), CASES)
def test_found_is_what_the_spawn_starts(
    tree: Path, command: str, path: str | None, status: str
) -> None:
    path = None if path is None else path.format(tmp=tree)
    cwd = tree / "ws"
    found = find_program(command, str(cwd), path)
    assert found.status == status, found.detail
    ran = _spawned(command, cwd, path)
    assert (ran is not None) == (status == "found")
    if ran is not None and command != "sh":  # /bin/sh prints nothing of its own path
        assert os.path.realpath(cwd / ran) == os.path.realpath(found.detail)


def test_process_cwd_is_a_directory_inside_the_workspace(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    assert process_cwd(str(tmp_path), None) == str(tmp_path.resolve())
    assert process_cwd(str(tmp_path), "sub") == str((tmp_path / "sub").resolve())
    for bad in ("missing", "../", "/etc"):
        with pytest.raises(PolicyDeniedError):
            process_cwd(str(tmp_path), bad)


def test_process_cwd_spelled_with_dots_and_slashes_is_the_workspace(tmp_path: Path) -> None:
    """``./`` (and ``.//.``) is the workspace, as ``.`` and no cwd are; ``/`` and ``./..``
    are not, and a symlink out of the workspace stays denied however it is spelled."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "out").symlink_to(tmp_path)
    for root in ("", ".", "./", ".//."):
        assert process_cwd(str(workspace), root) == str(workspace.resolve())
    for bad in ("/", "./..", "./../ws", "out", "./out/"):
        with pytest.raises(PolicyDeniedError):
            process_cwd(str(workspace), bad)
