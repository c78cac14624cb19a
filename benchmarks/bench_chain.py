"""Benchmark: a pure chain — N sequential ``builtin.assign`` tasks (task i needs task i-1).

Each task is one durable step: prepared and rendered in the coordinator, then committed
(state, output, audit event, checkpoint) in its own transaction — a chain has no batch to
amortise the commit over. Measured two ways, each in a fresh database per run:
- in-process: the clock runs around ``agentctl.coordinator.api.start_run`` only (the workflow
  is compiled before), which isolates the runtime;
- CLI: ``agentctl --output json run FILE --db PATH`` as a fresh process, end to end
  (interpreter start, imports, YAML load, compile, run, render), which also yields the
  coordinator's peak RSS.
``_cli_marginal`` subtracts the median wall of a one-task run (start-up), leaving the per-task
cost of parsing, compiling and running. Targets (reported, never asserted): ≤ 0.3 ms per pure
task; RSS ≤ 120 MB at 10,000 tasks.

Compiler linearity (``--compile-sizes``, issue 15 item 3): CPU time per task (process time, so
other processes' load does not count) of ``load_workflow`` on the chain's YAML (``_load``:
parse + validate; only while the source fits the 1 MiB limit) and of ``compile_workflow`` on
its document (``_compile``); linear means the per-task figures stay flat as the size grows.

Run: ``python benchmarks/bench_chain.py [--sizes 1000,10000] [--compile-sizes 1000,10000,50000]
[--runs 5] [--json]``.
"""

from __future__ import annotations

import gc
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import benchkit


def one_task_cli(runs: int, workdir: Path, cap_s: float, budget_s: float) -> float:
    """Median wall of ``agentctl run`` on a one-task chain: start-up, not per-task work."""
    yaml_path = benchkit.write_yaml(benchkit.pure_chain(1), workdir / "chain1.yaml")

    def once(d: Path) -> benchkit.Timed:
        return benchkit.run_cli(yaml_path, d / "runtime.db", cap_s=cap_s)

    # One untimed run first: the very first process of a suite pays cold caches (pages of the
    # interpreter and site-packages), which would otherwise make start-up look slower than a
    # whole chain and the marginal cost negative.
    benchkit.series(1, once, workdir, "chain1-warm", budget_s)
    one = benchkit.series(runs, once, workdir, "chain1-cli", budget_s)
    return statistics.median(one.seconds)


# Below this many tasks their cost is within the noise of one start-up (a one-task run can
# even take longer than a 100-task one here), so the difference would say nothing.
MARGINAL_MIN_TASKS = 1000


def measure_size(
    n: int, runs: int, workdir: Path, cap_s: float, budget_s: float, one_s: float
) -> list[benchkit.Figure]:
    doc = benchkit.pure_chain(n)
    inproc = benchkit.series(
        runs,
        lambda d: benchkit.run_inprocess(doc, d, cap_s=cap_s),
        workdir,
        f"chain{n}-in",
        budget_s,
    )
    yaml_path = benchkit.write_yaml(doc, workdir / f"chain{n}.yaml")
    cli = benchkit.series(
        runs,
        lambda d: benchkit.run_cli(yaml_path, d / "runtime.db", cap_s=cap_s),
        workdir,
        f"chain{n}-cli",
        budget_s,
    )
    figures = [
        benchkit.per_item_figure(f"pure_chain_{n}_inprocess", inproc, n),
        benchkit.rate_figure(f"pure_chain_{n}_inprocess_rate", inproc, n),
        benchkit.per_item_figure(f"pure_chain_{n}_cli", cli, n),
        benchkit.figure(f"pure_chain_{n}_cli_wall", "s", cli.seconds, note=cli.note),
        benchkit.figure(
            f"coordinator_peak_rss_{n}", "MB", [r.max_rss_mb for r in cli.runs], note=cli.note
        ),
    ]
    if n >= MARGINAL_MIN_TASKS:
        # Beyond a one-task run (measured in the same minutes): parse + compile + run per task.
        marginal = [(s - one_s) * 1000 / (n - 1) for s in cli.seconds]
        figures.append(
            benchkit.figure(
                f"pure_chain_{n}_cli_marginal", "ms/task", marginal, note=cli.note, difference=True
            )
        )
    return figures


def compile_figures(n: int, runs: int) -> list[benchkit.Figure]:
    """Per-task CPU of loading (parse + validate) and of compiling an ``n``-task chain."""
    import yaml

    from agentctl.core.compiler import compile_workflow
    from agentctl.core.dsl import MAX_SOURCE_BYTES, load_workflow

    doc = benchkit.pure_chain(n)
    text = yaml.safe_dump(doc, default_flow_style=None, width=1 << 20, sort_keys=False)
    fits = len(text.encode("utf-8")) <= MAX_SOURCE_BYTES
    load, build = [], []
    for _ in range(runs):
        gc.collect()
        if fits:
            t0 = time.process_time()
            document = load_workflow(text).document
            load.append((time.process_time() - t0) * 1000 / n)
        else:
            document = doc
        t0 = time.process_time()
        compile_workflow(document)
        build.append((time.process_time() - t0) * 1000 / n)
    note = "CPU (process time) per task"
    figures = [benchkit.figure(f"pure_chain_{n}_compile", "ms/task", build, note=note)]
    if load:
        figures.append(benchkit.figure(f"pure_chain_{n}_load", "ms/task", load, note=note))
    return figures


def main(
    sizes: str = "1000,10000",
    compile_sizes: str = "1000,10000,50000",
    runs: int = 5,
    cap_s: float = 300.0,
    budget_s: float = 100.0,
    workdir: Path | None = None,
) -> dict[str, Any]:
    """``budget_s``: stop repeating a figure once its runs took that long (≥ 1 run each)."""
    figures: list[benchkit.Figure] = []
    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        one_s = one_task_cli(runs, Path(tmp), cap_s, budget_s)
        for n in (int(s) for s in sizes.split(",")):
            figures += measure_size(n, runs, Path(tmp), cap_s, budget_s, one_s)
    for n in (int(s) for s in compile_sizes.split(",") if s):
        figures += compile_figures(n, runs)
    return {"benchmark": "pure_chain", "figures": [f.to_json() for f in figures]}


if __name__ == "__main__":
    defaults = {
        "sizes": "1000,10000",
        "compile_sizes": "1000,10000,50000",
        "runs": 5,
        "cap_s": 300.0,
        "budget_s": 100.0,
    }
    benchkit.module_cli(__doc__, main, defaults)
