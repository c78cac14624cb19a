"""The worker's file executors check what the coordinator checked, on their own.

The coordinator previews a write (and refuses a protected or non-text target) before it sends
the effect; the file can change in between, and a worker is the last place that decides. These
call the executors directly with the request the coordinator builds.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from agentctl.errors import PolicyDeniedError, RunFailedError
from agentctl.workers.executors.files import execute_read, execute_write
from tests.wire_messages import execute_msg


def test_a_write_over_a_non_utf8_file_is_refused(tmp_path: Path) -> None:
    target = tmp_path / "out" / "b.txt"
    target.parent.mkdir()
    target.write_bytes(b"ab\xffcd")
    request = {"workspace": str(tmp_path), "writableRoots": ["out"], "path": "out/b.txt"}
    msg = execute_msg("builtin.write", {**request, "content": "ab\ufffdcd"})
    with pytest.raises(RunFailedError, match=r"'out/b\.txt': the existing file is not valid UTF-8"):
        trio.run(execute_write, msg)
    assert target.read_bytes() == b"ab\xffcd"


def test_protected_paths_are_refused_for_reading_and_writing(tmp_path: Path) -> None:
    state = tmp_path / ".agentctl"
    (state / "artifacts").mkdir(parents=True)
    database = state / "runtime.db"
    database.write_bytes(b"SQLite format 3\x00")
    (tmp_path / "alias.db").hardlink_to(database)
    protected = [str(database), str(state / "artifacts")]
    base = {"workspace": str(tmp_path), "protectedPaths": protected}
    for path in (".agentctl/runtime.db", "alias.db", ".agentctl/artifacts/x"):
        write = {**base, "writableRoots": ["."], "path": path, "content": "x"}
        with pytest.raises(PolicyDeniedError, match="agentctl's own ledger state"):
            trio.run(execute_write, execute_msg("builtin.write", write))
        if path != ".agentctl/artifacts/x":
            with pytest.raises(PolicyDeniedError, match="agentctl's own ledger state"):
                trio.run(execute_read, execute_msg("builtin.read", {**base, "path": path}))
    assert database.read_bytes() == b"SQLite format 3\x00"
    assert not (state / "artifacts" / "x").exists()
