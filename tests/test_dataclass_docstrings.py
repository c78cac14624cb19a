"""Every dataclass of the package has its own docstring, checked on the real source.

DESIGN.md asks for one; it also costs start-up when missing: ``dataclasses`` makes a
``__doc__`` for a class without one from ``inspect.signature`` of the class, every time the
class is defined (40 classes on the way to a one-task ``run``: ~2% of its instructions).
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "agentctl"


def _is_dataclass(node: ast.ClassDef) -> bool:
    for deco in node.decorator_list:
        target = deco.func if isinstance(deco, ast.Call) else deco
        name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
        if name == "dataclass":
            return True
    return False


def _undocumented(source: str) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(source)):
        undocumented = isinstance(node, ast.ClassDef) and ast.get_docstring(node) is None
        if undocumented and _is_dataclass(node):
            found.append(f"{node.name} (line {node.lineno})")
    return found


def test_every_dataclass_has_a_docstring() -> None:
    missing = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for name in _undocumented(path.read_text(encoding="utf-8")):
            missing.append(f"{path.relative_to(PACKAGE.parent)}: {name}")
    assert missing == []


def test_the_check_sees_each_spelling_of_the_decorator() -> None:
    source = (
        "import dataclasses\nfrom dataclasses import dataclass\n"
        "@dataclass\nclass A:\n    x: int\n"
        "@dataclass(frozen=True)\nclass B:\n    x: int\n"
        "@dataclasses.dataclass(slots=True)\nclass C:\n    x: int\n"
        '@dataclass\nclass D:\n    """Documented."""\n    x: int\n'
        "class E:\n    x: int\n"
    )
    assert _undocumented(source) == ["A (line 4)", "B (line 7)", "C (line 10)"]
