"""Every declared runtime dependency is imported by ``agentctl`` (ADR 0004).

An unused declaration costs every user an install and a version constraint for nothing; this
fails the day a dependency stops being used, so it is dropped in the same change.
"""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Distribution name → the top-level module it installs, where the two differ.
MODULE_OF = {"pyyaml": "yaml", "sqlite-utils": "sqlite_utils"}


def _imported_top_levels() -> set[str]:
    found: set[str] = set()
    for path in (ROOT / "agentctl").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                found.add(node.module.split(".")[0])
    return found


def test_every_runtime_dependency_is_imported() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    names = [
        re.split(r"[<>=!~\[; ]", spec, maxsplit=1)[0].lower() for spec in project["dependencies"]
    ]
    imported = _imported_top_levels()
    unused = [n for n in names if MODULE_OF.get(n, n.replace("-", "_")) not in imported]
    assert unused == []
