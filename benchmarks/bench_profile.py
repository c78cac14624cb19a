"""Profile: where a run's time goes, on the two hottest paths (pyinstrument, sampling).

Workloads: the 10,000-task pure chain and the 1,000-task ``builtin.write`` effect chain, each
profiled once around ``api.start_run``; and ``api.resume`` of an 11,000-task chain SIGKILLed
after 10,000 tasks (as in ``bench_recovery``). The coordinator reaches SQLite through
``trio.to_thread.run_sync``, and a sampling profiler sees only the thread it started in; so
for the profile (only) that call is replaced by a direct call, putting the ledger's work in
the same trace. The run is then slightly faster than a real one (no thread hop), and every
cost is attributed to the function that pays it.

Reported per workload, each as a share of the profiled run: the top functions by self time
(any code, with ``file:line``), and the top agentctl functions by *attributed* time — every
sample charged to the innermost agentctl frame on its stack, so the time of a library call
(sqlite3, json, pydantic, fsync) lands on the agentctl function that made it. Compilation
and imports happen before the profiler starts.

Run: ``python benchmarks/bench_profile.py [--chain 10000] [--effects 1000] [--json]``.
"""

from __future__ import annotations

import sys
import tempfile
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import benchkit

INTERVAL_S = 0.0005
IDLE = "(idle: trio waits for I/O — worker replies, subprocess exits)"


def inline_ledger_thread() -> Callable[[], None]:
    """Replace ``trio.to_thread.run_sync`` by a direct call; returns the undo."""
    import trio

    original = trio.to_thread.run_sync

    async def direct(fn: Callable[..., Any], *args: Any, **_kw: Any) -> Any:
        return fn(*args)

    trio.to_thread.run_sync = direct  # type: ignore[assignment]

    def undo() -> None:
        trio.to_thread.run_sync = original

    return undo


def profile_run(doc: dict[str, Any], workdir: Path) -> Any:
    from pyinstrument import Profiler

    from agentctl.core.compiler import compile_workflow

    plan = compile_workflow(doc)
    benchkit.run_inprocess(benchkit.pure_chain(2), workdir / "warm")  # imports, caches
    undo = inline_ledger_thread()
    profiler = Profiler(interval=INTERVAL_S, async_mode="disabled")
    try:
        profiler.start()
        timed = benchkit.start_compiled(doc, plan, workdir)
        profiler.stop()
    finally:
        undo()
    if timed.state != "succeeded":
        raise RuntimeError("the profiled run did not succeed")
    return profiler.last_session


def _where(frame: Any) -> str:
    path = frame.file_path or ""
    marker = "/agentctl/"
    if marker in path:
        path = "agentctl/" + path.split(marker, 1)[1]
    elif "site-packages/" in path:
        path = path.split("site-packages/", 1)[1]
    else:
        path = Path(path).name if path else ""
    return f"{frame.function} ({path}:{frame.line_no})" if path else frame.function


def summarise(session: Any, top: int = 12) -> dict[str, Any]:
    """Self-time and inclusive-time rankings from a pyinstrument session."""
    root = session.root_frame()
    total = root.time
    self_time: dict[str, float] = defaultdict(float)
    attributed: dict[str, float] = defaultdict(float)
    callers: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))

    def walk(frame: Any, owner: str, caller: str) -> None:
        if frame.is_synthetic:
            return
        name = _where(frame)
        if "agentctl/" in name and name != owner:
            owner, caller = name, owner
        elif frame.function in ("poll", "get_events") and "epoll" in name.lower():
            owner, caller = IDLE, owner
        self_time[name] += frame.total_self_time
        attributed[owner] += frame.total_self_time
        callers[owner][caller] += frame.total_self_time
        for child in frame.children:
            walk(child, owner, caller)

    walk(root, "(outside agentctl)", "")

    def ranked(table: dict[str, float]) -> list[dict[str, Any]]:
        rows = sorted(table.items(), key=lambda kv: kv[1], reverse=True)[:top]
        out = []
        for k, v in rows:
            row = {"function": k, "seconds": v, "share": v / total}
            if k in callers:
                row["via"] = max(callers[k].items(), key=lambda kv: kv[1])[0]
            out.append(row)
        return out

    return {
        "seconds": total,
        "selfTime": ranked(self_time),
        "attributed": ranked(attributed),
        "tree": session_text(session),
    }


def session_text(session: Any) -> str:
    from pyinstrument.renderers import ConsoleRenderer

    renderer = ConsoleRenderer(unicode=False, color=False, short_mode=True, time="percent_of_total")
    text: str = renderer.render(session)
    return "\n".join(line for line in text.splitlines()[:80] if line.strip())


def profile_resume(total: int, kill_at: int, workdir: Path) -> Any:
    """SIGKILL a ``total``-task chain at ``kill_at`` done (as bench_recovery does), then
    profile ``api.resume`` to completion."""
    import bench_recovery
    from pyinstrument import Profiler

    workdir.mkdir(parents=True, exist_ok=True)
    yaml_path = benchkit.write_yaml(benchkit.pure_chain(total), workdir / "chain.yaml")
    db = workdir / "runtime.db"
    bench_recovery.crash_at(yaml_path, db, kill_at, cap_s=600)
    undo = inline_ledger_thread()
    profiler = Profiler(interval=INTERVAL_S, async_mode="disabled")
    try:
        profiler.start()
        bench_recovery.resume_timed(db, workdir)
        profiler.stop()
    finally:
        undo()
    return profiler.last_session


def main(
    chain: int = 10000,
    effects: int = 1000,
    resume_total: int = 11000,
    resume_kill_at: int = 10000,
    workdir: Path | None = None,
) -> dict[str, Any]:
    try:
        import pyinstrument  # noqa: F401
    except ImportError:
        why = "pyinstrument is not installed (pip install -e '.[bench]')"
        return {"benchmark": "profile", "figures": [], "profiles": {}, "unavailable": why}
    profiles = {}
    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        for name, doc in (
            (f"pure_chain_{chain}", benchkit.pure_chain(chain)),
            (f"write_chain_{effects}", benchkit.write_chain(effects)),
        ):
            profiles[name] = summarise(profile_run(doc, Path(tmp) / name))
        name = f"resume_{resume_kill_at}"
        profiles[name] = summarise(profile_resume(resume_total, resume_kill_at, Path(tmp) / name))
    figures = [
        benchkit.figure(f"profiled_{name}", "s", [p["seconds"]], note="one profiled run")
        for name, p in profiles.items()
    ]
    return {
        "benchmark": "profile",
        "figures": [f.to_json() for f in figures],
        "profiles": profiles,
    }


def _print(result: dict[str, Any]) -> None:
    for name, prof in result["profiles"].items():
        print(f"== {name}: {prof['seconds']:.2f} s profiled")
        for title, key in (("self time", "selfTime"), ("attributed (agentctl)", "attributed")):
            print(f"  top by {title}:")
            for row in prof[key]:
                via = f"  <- {row['via']}" if row.get("via") else ""
                print(f"    {row['share'] * 100:5.1f}%  {row['function']}{via}")


DEFAULTS = {"chain": 10000, "effects": 1000, "resume_total": 11000, "resume_kill_at": 10000}

if __name__ == "__main__":
    if "--json" in sys.argv:
        benchkit.module_cli(__doc__, main, DEFAULTS)
    else:
        sys.argv.append("--json")
        import contextlib
        import io

        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            benchkit.module_cli(__doc__, main, DEFAULTS)
        import json

        _print(json.loads(buf.getvalue().split("BENCH-JSON ", 1)[1]))
