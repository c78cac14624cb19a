"""The documentation's console examples, executed: docs never drift from the CLI.

A fenced ```console block preceded by ``<!-- run -->`` is run. Each marked block of one page
runs, in page order, in one fresh temporary directory holding a copy of ``examples/``, with
``agentctl`` on PATH and a clean environment (no provider keys, no ``AGENTCTL_*``).

Block syntax (what a reader sees in a terminal):
- ``$ COMMAND`` is a command (a trailing ``\\`` continues it on the next line); the lines
  after it, up to the next ``$``, are its output (stdout and stderr together);
- ``…`` inside an output line stands for any text; a line holding only ``…`` for any lines;
  an output line must otherwise match exactly (trailing spaces aside), and all the output must
  be accounted for;
- every command must exit 0, unless the next command is ``echo $?`` (which shows and so
  checks its code) or the command ends with ``# exit N``;
- ``RUN`` and ``APPROVAL`` in a command stand for the newest run and its first pending
  approval (looked up through ``--output json``); in output they match any id.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import EXAMPLES

DOCS = Path(__file__).resolve().parents[2] / "docs"
_MARKER = "<!-- run -->"
_EXIT = re.compile(r"#\s*exit\s+(\d+)\s*$")
_WORDS = {"RUN": r"\S+", "APPROVAL": r"\S+"}


@dataclass(frozen=True)
class Step:
    command: str
    output: tuple[str, ...]
    line: int  # where the command is in the page, for failure messages


def _blocks(text: str) -> list[list[Step]]:
    lines = text.splitlines()
    found: list[list[Step]] = []
    for i, line in enumerate(lines):
        if line.strip() == _MARKER and i + 1 < len(lines) and lines[i + 1] == "```console":
            end = lines.index("```", i + 2)
            found.append(_steps(lines[i + 2 : end], i + 3))
    return found


def _steps(body: list[str], first_line: int) -> list[Step]:
    steps: list[Step] = []
    command: list[str] = []
    output: list[str] = []
    start = first_line
    for n, line in enumerate(body, first_line):
        if command and command[-1].endswith("\\"):
            command.append(line)
        elif line.startswith("$ "):
            if command:
                steps.append(Step("\n".join(command), tuple(output), start))
            command, output, start = [line[2:]], [], n
        else:
            output.append(line)
    if command:
        steps.append(Step("\n".join(command), tuple(output), start))
    return steps


def _pattern(line: str) -> re.Pattern[str]:
    parts = re.split(r"(…|\bRUN\b|\bAPPROVAL\b)", line.rstrip())
    regex = "".join(".*" if p == "…" else _WORDS.get(p) or re.escape(p) for p in parts)
    return re.compile(regex)


def _matches(expected: tuple[str, ...], actual: list[str]) -> bool:
    """Whether ``actual`` lines match ``expected`` (``…`` lines skip any number of lines)."""
    memo: dict[tuple[int, int], bool] = {}

    def go(e: int, a: int) -> bool:
        if (e, a) not in memo:
            if e == len(expected):
                memo[e, a] = a == len(actual)
            elif expected[e].strip() == "…":
                memo[e, a] = go(e + 1, a) or (a < len(actual) and go(e, a + 1))
            else:
                fits = a < len(actual) and _pattern(expected[e]).fullmatch(actual[a]) is not None
                memo[e, a] = fits and go(e + 1, a + 1)
        return memo[e, a]

    return go(0, 0)


class Shell:
    """A scratch directory with the examples, and a way to run one command in it."""

    def __init__(self, root: Path) -> None:
        self.root = root / "work"
        # What a run in place may leave in examples/ (its outputs, its state) is not copied.
        shutil.copytree(EXAMPLES, self.root, ignore=shutil.ignore_patterns("out", ".agentctl"))
        bindir = root / "bin"
        bindir.mkdir()
        shim = bindir / "agentctl"
        shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m agentctl "$@"\n')
        shim.chmod(0o755)
        self.env = {
            "PATH": f"{bindir}:/usr/local/bin:/usr/bin:/bin",
            "HOME": str(root),
            "LANG": "C.UTF-8",
            "TERM": "dumb",
        }
        self.last_rc = 0

    def run(self, command: str) -> tuple[int, list[str]]:
        script = f"( exit {self.last_rc} )\n{command}\n"
        done = subprocess.run(
            ["bash", "-c", script],
            cwd=self.root,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=300,
        )
        self.last_rc = done.returncode
        lines = [line.rstrip() for line in done.stdout.splitlines()]
        while lines and not lines[-1]:
            lines.pop()
        return done.returncode, lines

    def newest(self, word: str) -> str:
        """The id ``RUN`` or ``APPROVAL`` stands for now."""
        kept = self.last_rc  # the lookup must not change what ``echo $?`` shows next
        _rc, lines = self.run("agentctl --output json runs list --limit 1")
        run = str(json.loads(lines[-1])["data"]["runs"][0]["runId"])
        if word == "RUN":
            self.last_rc = kept
            return run
        _rc, lines = self.run(f"agentctl --output json approvals list {run}")
        self.last_rc = kept
        approvals = json.loads(lines[-1])["data"]["approvals"]
        return str(next(a for a in approvals if a["status"] == "pending")["approvalId"])

    def substitute(self, command: str) -> str:
        for word in ("RUN", "APPROVAL"):
            if re.search(rf"\b{word}\b", command.split("#")[0]):
                command = re.sub(rf"\b{word}\b", self.newest(word), command)
        return command


def _pages() -> list[Path]:
    return sorted(p for p in DOCS.glob("*.md") if _MARKER in p.read_text(encoding="utf-8"))


def test_pages_with_runnable_blocks_exist() -> None:
    names = {p.name for p in _pages()}
    assert {"troubleshooting.md", "getting-started.md"} <= names


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")
@pytest.mark.parametrize("page", _pages(), ids=lambda p: p.name)
def test_console_blocks_run_as_documented(page: Path, tmp_path: Path) -> None:
    shell = Shell(tmp_path)
    steps = [s for block in _blocks(page.read_text(encoding="utf-8")) for s in block]
    assert steps, f"{page.name}: a run marker without a console block"
    for i, step in enumerate(steps):
        rc, actual = shell.run(shell.substitute(step.command))
        where = f"{page.name}:{step.line}: $ {step.command}"
        shown = "\n".join(actual)
        assert _matches(step.output, actual), f"{where}\n--- got:\n{shown}"
        wanted = _EXIT.search(step.command)
        checked_next = i + 1 < len(steps) and steps[i + 1].command.strip() == "echo $?"
        if wanted:
            assert rc == int(wanted.group(1)), f"{where}: exit {rc}\n{shown}"
        elif not checked_next:
            assert rc == 0, f"{where}: exit {rc}\n{shown}"
