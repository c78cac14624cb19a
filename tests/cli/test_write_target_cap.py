"""An existing ``builtin.write`` target is capped at 1 MiB, as a direct read is.

The original's security page lists "existing-write-target" among the files capped at 1 MiB:
a write reads the old content (the output's ``before``, the diff), so a larger file would be
read whole and recorded. The write, and its check-mode preview, refuse it (exit 4) and leave
the file as it was; one of exactly 1 MiB is still replaced.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import Cli

MIB = 1024 * 1024
WORKFLOW = """\
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: { name: cap }
spec:
  policy: { approval: never, writableRoots: [out] }
  actions: { write: { kind: builtin.write } }
  tasks:
    - { id: w, uses: action:write, with: { path: out/target.txt, content: small } }
"""


@pytest.mark.parametrize("mode", [[], ["--check"]])
def test_a_write_over_a_target_larger_than_1_mib_is_refused(
    cli: Cli, tmp_path: Path, mode: list[str]
) -> None:
    (tmp_path / "out").mkdir()
    target = tmp_path / "out" / "target.txt"
    target.write_bytes(b"x" * (MIB + 1))
    (tmp_path / "wf.yaml").write_text(WORKFLOW, encoding="utf-8")
    done = cli("--output", "json", "run", "wf.yaml", "--db", "s.db", *mode)
    assert done.rc == 4, (done.stdout, done.stderr)
    message = done.error["error"]["message"]
    assert "existing file is larger than 1048576 bytes" in message, message
    assert target.stat().st_size == MIB + 1  # untouched
    assert "x" * 1000 not in done.stdout + done.stderr


def test_a_target_of_exactly_1_mib_is_replaced(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "out").mkdir()
    target = tmp_path / "out" / "target.txt"
    target.write_bytes(b"x" * MIB)
    (tmp_path / "wf.yaml").write_text(WORKFLOW, encoding="utf-8")
    done = cli("--output", "json", "run", "wf.yaml", "--db", "s.db")
    assert done.rc == 0, done.stderr
    assert target.read_text(encoding="utf-8") == "small"
