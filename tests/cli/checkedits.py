"""One check-a-near-miss helper for the CLI tests: edit a workflow, run `check`, find the code."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import Cli


def assert_check_edit(
    cli: Cli,
    tmp_path: Path,
    text: str,
    edit: tuple[str, str],
    code: str | None,
    needle: str | None,
) -> None:
    """``text`` with ``edit`` (old → new; ``("", "")`` keeps it) passes ``check`` when ``code`` is
    None, else fails it (exit 2) with a diagnostic of ``code`` whose message holds ``needle``."""
    old, new = edit
    assert text.count(old) == 1 or not old
    (tmp_path / "wf.yaml").write_text(text.replace(old, new) if old else text)
    done = cli("--output", "json", "check", "wf.yaml")
    if code is None:
        assert done.rc == 0, done.stderr
        return
    assert done.rc == 2, (done.stdout, done.stderr)
    found = [(d["code"], d["message"]) for d in done.error["diagnostics"]]
    assert any(c == code and (needle or "") in m for c, m in found), found
