"""Benchmark: an effect chain — N sequential effect tasks, each one recorded effect.

Two kinds, each a chain where task i needs task i-1 (so nothing overlaps):
- ``builtin.write`` of a distinct small file ``out/f{i}.txt`` (distinct content: an unchanged
  file would be no effect at all);
- ``builtin.shell.exec`` of ``/bin/true`` (no arguments; argv only, cleared environment);
- ``builtin.memory.write`` of key ``k`` (a recorded effect on state the coordinator owns: the
  same effect protocol and commits, but no worker hop — the effect floor of the protocol).
Per effect the runtime commits the effect ``requested``/``started`` before the worker runs
it, sends one ``Execute`` to a reused worker process, and commits the outcome with the task's
completion in the transaction that starts the next task (ADR 0011): one commit per step
(``builtin.write`` adds its artifact ingestion, see commits_per_effect.md).
The worker figures include the one-off start of the single worker (maxConcurrency 1 ⇒ pool
of 1), spread over the N effects. Measured in-process (around ``api.start_run``) and via the CLI;
``…_beyond_first`` is the in-process chain less a one-step chain's run, per further step: the
step without the run's one-off costs (the ledger's creation, the worker's start).
Target (reported, never asserted): ≤ 1.0 ms per effect.

Run: ``python benchmarks/bench_effects.py [--n 1000] [--runs 5] [--json]``.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import benchkit

BEYOND_FIRST_MIN_STEPS = 100

KINDS = {
    "write": benchkit.write_chain,
    "shell": benchkit.shell_chain,
    "memory": benchkit.memory_chain,
}


def measure_kind(
    kind: str, n: int, runs: int, workdir: Path, budget_s: float
) -> list[benchkit.Figure]:
    doc = KINDS[kind](n)
    inproc = benchkit.series(
        runs, lambda d: benchkit.run_inprocess(doc, d), workdir, f"{kind}{n}-in", budget_s
    )

    def cli_once(d: Path) -> benchkit.Timed:
        # Each run needs a fresh workspace too: rewriting identical files is no effect.
        yaml_path = benchkit.write_yaml(doc, d / "wf.yaml")
        return benchkit.run_cli(yaml_path, d / "runtime.db")

    cli = benchkit.series(runs, cli_once, workdir, f"{kind}{n}-cli", budget_s)
    figures = [
        benchkit.per_item_figure(f"effect_chain_{kind}_{n}_inprocess", inproc, n),
        benchkit.per_item_figure(f"effect_chain_{kind}_{n}_cli", cli, n),
    ]
    # Below ~100 steps one run's start-up spread (tens of ms) outweighs the steps themselves,
    # and the difference can come out negative: no figure is better than a meaningless one.
    if n >= BEYOND_FIRST_MIN_STEPS and not inproc.capped:
        figures.append(beyond_first_figure(kind, n, inproc, runs, workdir))
    return figures


def beyond_first_figure(
    kind: str, n: int, inproc: benchkit.Series, runs: int, workdir: Path
) -> benchkit.Figure:
    """ms per step of the in-process chain beyond a one-step chain's run: (T(n) - T(1)) / (n - 1).

    The per-step figure above spreads the run's one-off costs over its n steps — the ledger's
    creation and, for the worker kinds, the one worker's start (an interpreter importing trio
    and pydantic), which the first effect waits for. This one takes them out, so the two side
    by side say how much of a step is the step. Reported beside the goal's figure, not instead
    of it."""
    one_doc = KINDS[kind](1)
    one = benchkit.series(
        runs, lambda d: benchkit.run_inprocess(one_doc, d), workdir, f"{kind}1-in"
    )
    first = statistics.median(one.seconds)
    samples = [(t - first) * 1000 / (n - 1) for t in inproc.seconds]
    note = f"a one-step chain's run: {first * 1000:.1f} ms (median of {len(one.seconds)})"
    return benchkit.figure(
        f"effect_chain_{kind}_{n}_inprocess_beyond_first",
        "ms/task",
        samples,
        note=note,
        difference=True,
    )


def main(n: int = 1000, runs: int = 5, budget_s: float = 60.0, workdir: Path | None = None) -> Any:
    figures: list[benchkit.Figure] = []
    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        for kind in KINDS:
            figures += measure_kind(kind, n, runs, Path(tmp), budget_s)
    for f in figures:
        f.unit = "ms/effect"
    return {"benchmark": "effect_chain", "figures": [f.to_json() for f in figures]}


if __name__ == "__main__":
    benchkit.module_cli(__doc__, main, {"n": 1000, "runs": 5, "budget_s": 60.0})
