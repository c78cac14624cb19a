"""A ``builtin.write`` over an existing file that is not UTF-8 text fails closed.

A write records the file's old content as its output's ``before`` (the ``--diff``, and what a
compensation writes back). Decoded leniently, bytes that are not UTF-8 turned into U+FFFD: the
``before`` was not the file, and a write of that lossy text reported ``unchanged`` while the
file still held other bytes. The write now fails (exit 4) naming the path, as a
``builtin.read`` of the file does, and nothing is written; ``run --check`` says the same.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import Cli

ORIGINAL = b"ab\xffcd"
WORKFLOW = """\
apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: { name: binary-target }
spec:
  policy: { approval: never, writableRoots: [out] }
  actions: { save: { kind: builtin.write } }
  tasks:
    - { id: t, uses: "action:save", with: { path: out/b.txt, content: %s } }
"""


@pytest.mark.parametrize("mode", [[], ["--check"]])
@pytest.mark.parametrize("content", ['"ab\\uFFFDcd"', "replaced"])
def test_a_write_over_a_non_utf8_file_fails_and_writes_nothing(
    cli: Cli, tmp_path: Path, mode: list[str], content: str
) -> None:
    (tmp_path / "out").mkdir()
    target = tmp_path / "out" / "b.txt"
    target.write_bytes(ORIGINAL)
    (tmp_path / "wf.yaml").write_text(WORKFLOW % content, encoding="utf-8")
    done = cli("--output", "json", "run", "wf.yaml", *mode)
    assert done.rc == 4, (done.stdout, done.stderr)
    message = done.error["error"]["message"]
    assert "cannot write 'out/b.txt': the existing file is not valid UTF-8" in message, message
    assert "nothing was written" in message
    assert target.read_bytes() == ORIGINAL
    assert "Traceback" not in done.stderr
