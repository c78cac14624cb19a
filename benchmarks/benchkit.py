"""Shared helpers of the benchmark suite: statistics, workflow generators, timed runs.

Invariants:
- every figure is a ``Figure``: the raw samples plus min / median / max, so a report never
  shows a number without its spread;
- workflows are generated as plain dicts (and, for the CLI, written as YAML into a temporary
  directory) — no large workflow file is ever committed;
- an agentctl run measured here must end ``succeeded``; a run that hits its time cap ends
  ``cancelled`` and is reported as capped, never silently as a fast one.
"""

from __future__ import annotations

import json
import math
import os
import platform
import sqlite3
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]


def run_as_installed() -> None:
    """For ``make bench``: time agentctl as a user's installation runs it, with its modules
    compiled (pip writes the .pyc files at install). This machine's environment sets
    PYTHONDONTWRITEBYTECODE, under which every agentctl process a benchmark starts compiled
    each module changed since its .pyc was last written again (~1.2 G instructions, ~0.1 s
    per process with no .pyc at all): the .pyc files are written now and the benchmarks'
    processes, started from this one, run without the variable."""
    import compileall

    compileall.compile_dir(REPO / "agentctl", quiet=1)
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)


API_VERSION = "agentctl.dev/v1alpha1"


# --------------------------------------------------------------------------- statistics


@dataclass
class Figure:
    """One measured quantity: ``samples`` in ``unit``; lower is better unless ``higher``.

    ``difference`` marks a figure computed as one wall time less another (a marginal cost):
    under load at toy sizes it can honestly come out at or below zero, so only its
    finiteness is a sanity check, not its sign.
    """

    name: str
    unit: str
    samples: list[float]
    higher: bool = False
    note: str = ""
    difference: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "unit": self.unit,
            "runs": len(self.samples),
            "min": min(self.samples),
            "median": self.median,
            "max": max(self.samples),
            "samples": self.samples,
            "higherIsBetter": self.higher,
            "difference": self.difference,
            "note": self.note,
            "extra": self.extra,
        }


def figure(name: str, unit: str, samples: Iterable[float], **kw: Any) -> Figure:
    values = [float(s) for s in samples]
    if not values or not all(math.isfinite(v) for v in values):
        raise ValueError(f"figure {name!r} has no finite samples: {values}")
    return Figure(name, unit, values, **kw)


# --------------------------------------------------------------------------- workflows


def document(name: str, tasks: list[dict[str, Any]], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION,
        "kind": "Workflow",
        "metadata": {"name": name},
        "spec": {**spec, "tasks": tasks},
    }


def chain_tasks(n: int, action: str, make_with: Callable[[int], Any] | None = None) -> list[Any]:
    """``n`` tasks where task i needs task i-1: strictly sequential."""
    out: list[dict[str, Any]] = []
    for i in range(n):
        task: dict[str, Any] = {"id": f"t{i}", "uses": f"action:{action}"}
        if i:
            task["needs"] = [f"t{i - 1}"]
        with_ = make_with(i) if make_with else {"i": i}
        if with_ is not None:
            task["with"] = with_
        out.append(task)
    return out


def pure_chain(n: int) -> dict[str, Any]:
    return document("pure-chain", chain_tasks(n, "a"), actions={"a": {"kind": "builtin.assign"}})


def write_chain(n: int) -> dict[str, Any]:
    tasks = chain_tasks(n, "w", lambda i: {"path": f"out/f{i}.txt", "content": f"v{i}"})
    policy = {"approval": "never", "writableRoots": ["out"]}
    return document("write-chain", tasks, policy=policy, actions={"w": {"kind": "builtin.write"}})


def memory_chain(n: int) -> dict[str, Any]:
    """Each task a recorded ``builtin.memory.write`` effect (runs in the coordinator)."""
    tasks = chain_tasks(n, "m", lambda i: {"key": "k", "value": i})
    policy = {"approval": "never"}
    actions = {"m": {"kind": "builtin.memory.write"}}
    return document("memory-chain", tasks, policy=policy, actions=actions)


def shell_chain(n: int) -> dict[str, Any]:
    action = {"kind": "builtin.shell.exec", "command": "/bin/true", "timeoutSeconds": 30}
    policy = {"approval": "never", "processAllowlist": ["true"]}
    tasks = chain_tasks(n, "x", lambda _i: None)
    return document("shell-chain", tasks, policy=policy, actions={"x": action})


def sleep_batch(n: int, seconds: float) -> dict[str, Any]:
    """``n`` independent tasks, each sleeping in a subprocess, all at once."""
    action = {
        "kind": "builtin.shell.exec",
        "command": "/bin/sleep",
        "args": [f"{seconds:g}"],
        "timeoutSeconds": 60,
    }
    tasks = [{"id": f"s{i}", "uses": "action:nap"} for i in range(n)]
    return document(
        "sleep-batch",
        tasks,
        policy={"approval": "never", "processAllowlist": ["sleep"]},
        actions={"nap": action},
        runtime={"maxConcurrency": min(max(n, 1), 64)},
    )


def foreach_fanout(children: int, per_task: int = 250) -> dict[str, Any]:
    """``children`` assign children split over foreach tasks of at most ``per_task`` items."""
    tasks = []
    for k, start in enumerate(range(0, children, per_task)):
        items = list(range(start, min(start + per_task, children)))
        tasks.append(
            {
                "id": f"fan{k}",
                "uses": "action:a",
                "foreach": {"items": items, "as": "n", "maxItems": len(items)},
                "with": {"n": "${{ vars.n }}"},
            }
        )
    return document(
        "foreach-fanout",
        tasks,
        actions={"a": {"kind": "builtin.assign"}},
        runtime={"maxConcurrency": 64},
    )


def write_yaml(doc: dict[str, Any], path: Path) -> Path:
    """Compact flow-style YAML, so a 10,000-task chain stays under the 1 MiB source limit."""
    text = yaml.safe_dump(doc, default_flow_style=None, width=1 << 20, sort_keys=False)
    path.write_text(text, encoding="utf-8")
    return path


# --------------------------------------------------------------------------- running agentctl


@dataclass
class Timed:
    seconds: float
    state: str
    run_id: str = ""
    max_rss_mb: float = 0.0


def run_inprocess(doc: dict[str, Any], workdir: Path, *, cap_s: float | None = None) -> Timed:
    """Compile outside the clock, then time ``api.start_run`` — the runtime alone."""
    from agentctl.core.compiler import compile_workflow

    plan = compile_workflow(doc)
    return start_compiled(doc, plan, workdir, cap_s=cap_s)


def start_compiled(
    doc: dict[str, Any], plan: Any, workdir: Path, *, cap_s: float | None = None
) -> Timed:
    """Time one ``api.start_run`` of an already compiled workflow in a fresh database."""
    from agentctl.coordinator import api
    from agentctl.errors import AgentctlError

    workdir.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    try:
        out = api.start_run(
            document=doc,
            plan=plan,
            inputs={},
            db=str(workdir / "runtime.db"),
            workspace=str(workdir),
            timeout_s=cap_s,
        )
    except AgentctlError as exc:
        raise RuntimeError(f"benchmark run of {doc['metadata']['name']} failed: {exc}") from exc
    elapsed = time.perf_counter() - t0
    if out.state not in ("succeeded", "cancelled"):
        raise RuntimeError(f"benchmark run of {doc['metadata']['name']} ended {out.state}")
    return Timed(elapsed, out.state, out.run_id)


def agentctl_argv(*args: str) -> list[str]:
    script = Path(sys.executable).parent / "agentctl"
    if script.exists():
        return [str(script), *args]
    return [sys.executable, "-m", "agentctl", *args]


def run_cli(yaml_path: Path, db: Path, *, cap_s: float | None = None) -> Timed:
    """``agentctl --output json run`` as a user runs it: wall time and the coordinator's peak
    RSS (workers are separate processes and are not counted)."""
    argv = agentctl_argv("--output", "json", "run", str(yaml_path), "--db", str(db))
    if cap_s is not None:
        argv += ["--timeout-seconds", str(max(1, int(cap_s)))]
    out_path, err_path = db.with_suffix(".stdout"), db.with_suffix(".stderr")
    with out_path.open("wb") as out, err_path.open("wb") as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(
            argv, cwd=yaml_path.parent, stdin=subprocess.DEVNULL, stdout=out, stderr=err
        )
        # Reap it ourselves: wait4 gives the kernel's high-water mark of this process alone.
        _, status, usage = os.wait4(proc.pid, 0)
        elapsed = time.perf_counter() - t0
    proc.returncode = code = os.waitstatus_to_exitcode(status)
    state = "succeeded" if code == 0 else ("cancelled" if code == 130 else "")
    if not state:
        tail = err_path.read_text(errors="replace")[-800:]
        raise RuntimeError(f"agentctl run exited {code}: {tail}")
    text = out_path.read_text()
    run_id = json.loads(text)["data"].get("runId", "") if text.strip() else ""
    return Timed(elapsed, state, run_id, usage.ru_maxrss / 1024)


def count_succeeded(db: Path) -> int:
    """Succeeded tasks, read through a read-only connection (never blocks the writer)."""
    try:
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=1.0)
    except sqlite3.Error:
        return 0
    try:
        row = conn.execute("SELECT COUNT(*) FROM task_states WHERE state = 'succeeded'").fetchone()
        return int(row[0])
    except sqlite3.Error:
        return 0
    finally:
        conn.close()


# --------------------------------------------------------------------------- machine


def machine() -> dict[str, Any]:
    """What a reader needs to compare these figures with their own machine."""
    info: dict[str, Any] = {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "sqlite": sqlite3.sqlite_version,
    }
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                info["cpu"] = line.split(":", 1)[1].strip()
                break
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                info["memoryGiB"] = round(int(line.split()[1]) / 1024 / 1024, 1)
                break
    except OSError:
        pass
    return info


def disk_of(path: Path) -> str:
    """The mount (device and filesystem type) that holds ``path``."""
    try:
        best = ("", "", "")
        target = str(path.resolve())
        for line in Path("/proc/mounts").read_text().splitlines():
            dev, mnt, fstype = line.split()[:3]
            if target.startswith(mnt) and len(mnt) >= len(best[1]):
                best = (dev, mnt, fstype)
        return f"{best[0]} ({best[2]}) mounted at {best[1]}"
    except OSError:
        return "unknown"


def emit(result: dict[str, Any]) -> None:
    """The one line a benchmark module prints under ``--json`` for run_all to collect."""
    print("BENCH-JSON " + json.dumps(result), flush=True)


# --------------------------------------------------------------------------- repeated runs


@dataclass
class Series:
    """Repeated timed runs of one workload; stops early once a run hits its time cap."""

    runs: list[Timed] = field(default_factory=list)
    capped: bool = False
    done_when_capped: int = 0
    wanted: int = 0

    @property
    def note(self) -> str:
        """Why a figure has fewer runs than asked for (empty when it has them all)."""
        if self.capped:
            return "CAPPED: a run was cancelled at its time cap"
        if len(self.runs) < self.wanted:
            each = statistics.median(self.seconds)
            return (
                f"ONLY {len(self.runs)} of {self.wanted} runs: one run takes {each:.0f} s, "
                "so more would break the suite's time budget"
            )
        return ""

    @property
    def seconds(self) -> list[float]:
        return [r.seconds for r in self.runs]


def series(
    runs: int, once: Callable[[Path], Timed], workdir: Path, tag: str, budget_s: float = 1e9
) -> Series:
    """``runs`` runs of ``once``, each in a fresh directory (fresh database) under ``workdir``.

    A capped run (``cancelled``) ends the series: the next ones would be capped too. So does
    spending ``budget_s`` (after at least one run): a runtime far off its targets must not
    make the suite run for hours. Both are reported (``Series.note``), never hidden.
    """
    out = Series(wanted=runs)
    spent = 0.0
    for k in range(runs):
        if k and spent > budget_s:
            break
        run_dir = workdir / f"{tag}-{k}"
        run_dir.mkdir(parents=True, exist_ok=True)
        timed = once(run_dir)
        if timed.state == "cancelled":
            out.capped = True
            out.done_when_capped = count_succeeded(run_dir / "runtime.db")
            out.runs.append(timed)
            break
        out.runs.append(timed)
        spent += timed.seconds
    return out


def per_item_figure(name: str, s: Series, items: int, note: str = "") -> Figure:
    """ms per item from a series; a capped series reports cap / items-done as a lower bound."""
    if s.capped:
        done = max(s.done_when_capped, 1)
        cap = s.runs[-1].seconds
        return figure(
            name,
            "ms/task",
            [cap * 1000 / done],
            note=(
                f"CAPPED: the run was cancelled at its {cap:.0f} s cap after {done} of {items} "
                "tasks; figure is a lower bound (it grows with N)"
            ),
            extra={"capped": True, "doneWhenCapped": done},
        )
    return figure(name, "ms/task", [t * 1000 / items for t in s.seconds], note=note or s.note)


def rate_figure(name: str, s: Series, items: int, unit: str = "tasks/s") -> Figure:
    if s.capped:
        done = max(s.done_when_capped, 1)
        return figure(name, unit, [done / s.runs[-1].seconds], higher=True, note="CAPPED")
    return figure(name, unit, [items / t for t in s.seconds], higher=True, note=s.note)


def module_cli(
    doc: str | None, main: Callable[..., dict[str, Any]], defaults: dict[str, Any]
) -> None:
    """argparse over ``defaults`` (each ``--name``), plus ``--dir`` and ``--json``."""
    import argparse

    run_as_installed()  # a benchmark run alone measures what ``make bench`` does

    parser = argparse.ArgumentParser(description=doc)
    for key, value in defaults.items():
        parser.add_argument(f"--{key.replace('_', '-')}", type=type(value), default=value)
    parser.add_argument("--dir", type=Path, default=None, help="where the databases live")
    parser.add_argument("--json", action="store_true", help="one BENCH-JSON line for run_all")
    args = vars(parser.parse_args())
    as_json = args.pop("json")
    result = main(workdir=args.pop("dir"), **args)
    if as_json:
        emit(result)
        return
    for f in result["figures"]:
        print(
            f"{f['name']:34s} min {f['min']:10.4f}  median {f['median']:10.4f}  "
            f"max {f['max']:10.4f} {f['unit']}  ({f['runs']} runs) {f['note']}"
        )
    for note in result.get("notes", []):
        print("note:", note)
