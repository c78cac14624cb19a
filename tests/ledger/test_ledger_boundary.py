"""One way into state: outside ``agentctl/ledger/`` nothing touches SQLite or a transaction.

An AST walk over every module of the package outside the ledger: no ``sqlite3`` or
``sqlite_utils`` import, no call of a ``*_txn`` function, no ``.transaction(`` call, no
import of the raw connection module. Imports inside functions count too.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "agentctl"
LEDGER = PACKAGE / "ledger"
OUTSIDE = sorted(p for p in PACKAGE.rglob("*.py") if LEDGER not in p.parents)
FORBIDDEN_MODULES = {"sqlite3", "sqlite_utils", "agentctl.ledger.connection"}


def _called_name(call: ast.Call) -> str | None:
    func = call.func
    if isinstance(func, ast.Attribute):
        return func.attr
    if isinstance(func, ast.Name):
        return func.id
    return None


def _violations(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: list[str] = []
    for node in ast.walk(tree):
        modules: list[str] = []
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            modules = [node.module]
        for module in modules:
            if module in FORBIDDEN_MODULES or module.split(".")[0] in FORBIDDEN_MODULES:
                found.append(f"line {node.lineno}: imports {module}")
        if isinstance(node, ast.ImportFrom):
            found += [
                f"line {node.lineno}: imports {a.name}"
                for a in node.names
                if a.name.endswith("_txn") or a.name == "connection"
            ]
        if isinstance(node, ast.Call):
            name = _called_name(node)
            if name is not None and (name.endswith("_txn") or name == "transaction"):
                found.append(f"line {node.lineno}: calls {name}(")
    return found


@pytest.mark.parametrize("path", OUTSIDE, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_state_is_reached_only_through_the_ledger_interface(path: Path) -> None:
    assert _violations(path) == [], path.relative_to(PACKAGE)


def test_the_walk_sees_a_violation() -> None:
    sample = PACKAGE.parent / "tests" / "ledger" / "ledger_helpers.py"
    assert any("create_run_txn" in v for v in _violations(sample))
