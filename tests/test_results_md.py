"""RESULTS.md's rendering of a module the run skipped (benchmarks/results_md.py): the reason
is printed at the top and the section says it has no figure, rather than an empty table."""

from __future__ import annotations

import importlib.util
import json
import sys
from types import ModuleType
from typing import Any

from tests.conftest import REPO

BENCH = REPO / "benchmarks"


def _results_md() -> ModuleType:
    sys.path.insert(0, str(BENCH))  # results_md imports its siblings by name
    try:
        spec = importlib.util.spec_from_file_location("results_md", BENCH / "results_md.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(BENCH))


def _report() -> dict[str, Any]:
    meta = {
        "date": "2026-12-07 12:00 UTC",
        "machine": {"cpu": "cpu", "cpus": 2},
        "commit": "abc1234",
        "loadBefore": "0 0 0",
        "loadAfter": "0 0 0",
        "tiny": True,
        "command": "run_all.py --tiny",
        "suiteSeconds": 1.0,
    }
    skipped = {
        "benchmark": "scaleout",
        "module": "bench_scaleout",
        "skipped": "no PostgreSQL URL (--pg-url)",
        "notes": ["no PostgreSQL URL (--pg-url)"],
    }
    return json.loads(json.dumps({"meta": meta, "results": [skipped]}))


def test_a_skipped_module_is_named_with_its_reason_and_its_section_says_so() -> None:
    text = _results_md().render(_report())
    assert "- **scaleout not measured in this run**: no PostgreSQL URL (--pg-url)" in text
    section = text.split("## Scale-out: serve processes on PostgreSQL", 1)[1]
    body = section.split("\n## ", 1)[0]
    assert "No figure in this run" in body
    assert "| figure | unit |" not in body  # no empty table
