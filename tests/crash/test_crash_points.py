"""Every named crash point is placed in the code and killed at by a test.

The kill-and-recover tests parametrize over ``CrashPoint`` by prefix (coordinator and worker
points in test_crash_matrix.py, artifact and GC points in the ledger's artifact crash tests,
the new-ledger points in tests/ledger/test_ledger_new_crash.py,
the stream point in tests/cli/test_streaming.py),
so this file checks the two things those cannot: every point has a prefix one of them covers,
and every point is actually reached somewhere in ``agentctl`` (a point nobody calls would be a
test that kills nothing).
"""

from __future__ import annotations

import ast
from pathlib import Path

from agentctl.crashpoints import CrashPoint

PACKAGE = Path(__file__).resolve().parents[2] / "agentctl"
COVERED_PREFIXES = ("coordinator.", "worker.", "artifact.", "gc.", "stream.", "ledger.")


def _placed_points() -> set[str]:
    placed: set[str] = set()
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == "crash_point"
                and node.args
                and isinstance(node.args[0], ast.Attribute)
                and isinstance(node.args[0].value, ast.Name)
                and node.args[0].value.id == "CrashPoint"
            ):
                placed.add(node.args[0].attr)
    return placed


def test_every_point_is_covered_by_a_kill_test() -> None:
    uncovered = [p.value for p in CrashPoint if not p.startswith(COVERED_PREFIXES)]
    assert uncovered == []


def test_every_point_is_placed_in_the_code() -> None:
    assert {p.name for p in CrashPoint} == _placed_points()
