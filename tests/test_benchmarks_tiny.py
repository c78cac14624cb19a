"""Every benchmark of the suite still runs: ``benchmarks/run_all.py --tiny``, end to end.

Toy sizes only; the test checks that each benchmark produced its figures, that every figure
is a positive finite number with min ≤ median ≤ max, and that RESULTS.md was rendered with
every section. It never asserts a timing target (timing belongs to the benchmarks).
Optional parts (the peers, the profiler) must either produce figures or say why not.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import sys
from pathlib import Path
from typing import Any

from tests.conftest import REPO

BENCH = REPO / "benchmarks"


EXPECTED_FIGURES = [
    "sqlite_commit",
    "ledger_task_commit",
    "fsync",
    "frame_round_trip",
    "frame_round_trip_parked",
    "spawn_true",
    "shell_chain_bare",
    "memory_step_sql_replay",
    "write_chain_bare",
    "pure_chain_5_inprocess",
    "pure_chain_5_cli",
    "coordinator_peak_rss_5",
    "effect_chain_write_3_inprocess",
    "effect_chain_shell_3_inprocess",
    "effect_chain_memory_3_inprocess",
    "effect_chain_write_3_cli",
    "sleep_batch_4_inprocess",
    "sleep_batch_4_cli",
    "foreach_6_inprocess",
    "provider_batch_2_inprocess",
    "resume_1_to_completion",
    "resume_1_to_first_task",
    "crash_run_1_peak_rss",
    "durable_step_agentctl_pure",
    "durable_step_agentctl_effect",
    "check_cold_start",
]

# Figures computed as one wall less another, at tiny sizes: only these may come out ≤ 0.
# (The per-task marginals of the chains are not reported below ~100 tasks at all.)
DIFFERENCE_FIGURES = ["sleep_batch_4_cli_beyond_one_task"]

HEADINGS = (
    "## Goals",
    "## Floors",
    "## Pure chain",
    "## Effect chain",
    "## Parallel batch",
    "## Memory",
    "## Recovery",
    "## Peers",
    "## Profile",
    "## Scale-out",
)


def _run_tiny(tmp_path: Path) -> tuple[dict[str, Any], str]:
    sys.path.insert(0, str(BENCH))
    try:
        import run_all

        out, raw = tmp_path / "RESULTS.md", tmp_path / "results.json"
        run_all.main(["--tiny", "--out", str(out), "--json-out", str(raw), "--dir", str(tmp_path)])
    finally:
        sys.path.remove(str(BENCH))
    return json.loads(raw.read_text()), out.read_text()


def _installed(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def _assert_optional_parts_ran_or_say_why(results: dict[str, Any], figures: dict[str, Any]) -> None:
    """The peers and the profiler need optional packages: figures if installed, else why not."""
    peers = results["peers"]
    if _installed("dbos"):
        assert "durable_step_dbos" in figures
    else:
        assert "dbos" in peers["unavailable"]
    if _installed("langgraph") and _installed("langgraph.checkpoint.sqlite"):
        assert "durable_step_langgraph_sync" in figures
    else:
        assert "langgraph_sync" in peers["unavailable"]
    if _installed("pyinstrument"):
        assert "profiled_pure_chain_5" in figures
        assert results["profile"]["profiles"]["pure_chain_5"]["attributed"]
    else:
        assert "pyinstrument" in results["profile"]["unavailable"]


def test_every_benchmark_runs_at_a_tiny_size(tmp_path: Path) -> None:
    report, markdown = _run_tiny(tmp_path)
    results = {r["benchmark"]: r for r in report["results"]}
    failed = {name: r["error"] for name, r in results.items() if r.get("error")}
    assert not failed

    figures = {f["name"]: f for r in report["results"] for f in r["figures"]}
    for fig in figures.values():
        values = [fig["min"], fig["median"], fig["max"]]
        assert all(math.isfinite(v) for v in values), fig
        # A difference of two walls (a marginal cost) may honestly be ≤ 0 at toy sizes
        # under load; every measured quantity must be positive.
        assert fig["difference"] or all(v > 0 for v in values), fig
        assert fig["min"] <= fig["median"] <= fig["max"], fig
    differences = sorted(name for name, fig in figures.items() if fig["difference"])
    assert differences == DIFFERENCE_FIGURES

    assert [name for name in EXPECTED_FIGURES if name not in figures] == []

    _assert_optional_parts_ran_or_say_why(results, figures)

    scaleout = results["scaleout"]  # PostgreSQL: from the environment, else it skips itself
    if os.environ.get("AGENTCTL_BENCH_PG_URL") or os.environ.get("AGENTCTL_TEST_PG_URL"):
        assert "pg_commit_floor" in figures and "scaleout_runs_per_s_3_serve" in figures
    else:
        assert "no PostgreSQL URL" in scaleout["skipped"] and not scaleout["figures"]

    assert "TINY RUN" in markdown
    for heading in HEADINGS:
        assert heading in markdown
