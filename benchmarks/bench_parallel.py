"""Benchmark: parallel batches at ``maxConcurrency: 64``.

- sleep batch: 64 independent ``builtin.shell.exec`` tasks, each ``/bin/sleep 0.5``; the ideal
  wall time is one sleep (0.5 s). The pool is ``min(64, cpu_count)`` workers, each running
  many effects at once; the figure includes starting them. Target: ≤ 0.75 s wall.
- the same batch through the CLI *beyond a one-task run*: each CLI batch run is paired with an
  ``agentctl run`` of a one-task pure workflow just before it (same minutes, same load), and
  the figure is the batch's wall minus that one-task wall — what the 64 effects cost on top of
  a CLI run's fixed start-up. Goal (issue 15): ≤ 0.65 s.
- foreach fan-out: 1,000 ``builtin.assign`` children (foreach is capped at 256 items per
  task, so four foreach tasks of 250; plus their four aggregates) — children per second.
Both measured in-process (around ``api.start_run``) and via the CLI.

Run: ``python benchmarks/bench_parallel.py [--sleepers 64] [--sleep-s 0.5] [--children 1000]``.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import benchkit


def _inprocess(doc: dict[str, Any], runs: int, workdir: Path, tag: str, budget_s: float) -> Any:
    once = lambda d: benchkit.run_inprocess(doc, d)  # noqa: E731
    return benchkit.series(runs, once, workdir, f"{tag}-in", budget_s)


def _cli(doc: dict[str, Any], runs: int, workdir: Path, tag: str, budget_s: float) -> Any:
    yaml_path = benchkit.write_yaml(doc, workdir / f"{tag}.yaml")
    once = lambda d: benchkit.run_cli(yaml_path, d / "runtime.db")  # noqa: E731
    return benchkit.series(runs, once, workdir, f"{tag}-cli", budget_s)


def _paired_cli(
    doc: dict[str, Any], runs: int, workdir: Path, budget_s: float
) -> tuple[list[float], list[float]]:
    """(batch walls, one-task walls): each batch run right after its one-task run."""
    batch_yaml = benchkit.write_yaml(doc, workdir / "sleep.yaml")
    one_yaml = benchkit.write_yaml(benchkit.pure_chain(1), workdir / "one.yaml")
    batch, one = [], []
    for k in range(runs):
        if k and sum(batch) + sum(one) > budget_s:
            break
        run_dir = workdir / f"sleep-cli-{k}"
        run_dir.mkdir(parents=True)
        one.append(benchkit.run_cli(one_yaml, run_dir / "one.db").seconds)
        batch.append(benchkit.run_cli(batch_yaml, run_dir / "runtime.db").seconds)
    return batch, one


def main(
    sleepers: int = 64,
    sleep_s: float = 0.5,
    children: int = 1000,
    runs: int = 5,
    budget_s: float = 60.0,
    workdir: Path | None = None,
) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        base = Path(tmp)
        doc = benchkit.sleep_batch(sleepers, sleep_s)
        s_in = _inprocess(doc, runs, base, "sleep", budget_s)
        s_cli, one_cli = _paired_cli(doc, runs, base, budget_s)
        fanout = benchkit.foreach_fanout(children)
        f_in = _inprocess(fanout, runs, base, "fanout", budget_s)
        f_cli = _cli(fanout, runs, base, "fanout", budget_s)
    ideal = f"ideal {sleep_s:g} s"
    beyond = [b - o for b, o in zip(s_cli, one_cli, strict=True)]
    name = f"sleep_batch_{sleepers}"
    figures = [
        benchkit.figure(f"{name}_inprocess", "s", s_in.seconds, note=ideal),
        benchkit.figure(f"{name}_cli", "s", s_cli, note=ideal),
        benchkit.figure(f"{name}_cli_one_task", "s", one_cli, note="one-task pure run"),
        benchkit.figure(
            f"{name}_cli_beyond_one_task",
            "s",
            beyond,
            note="batch wall − one-task wall",
            difference=True,
        ),
        benchkit.rate_figure(f"foreach_{children}_inprocess", f_in, children, "children/s"),
        benchkit.per_item_figure(f"foreach_{children}_inprocess_per_child", f_in, children),
        benchkit.rate_figure(f"foreach_{children}_cli", f_cli, children, "children/s"),
    ]
    return {"benchmark": "parallel", "figures": [f.to_json() for f in figures]}


if __name__ == "__main__":
    defaults = {"sleepers": 64, "sleep_s": 0.5, "children": 1000, "runs": 5, "budget_s": 60.0}
    benchkit.module_cli(__doc__, main, defaults)
