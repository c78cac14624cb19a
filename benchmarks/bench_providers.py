"""Benchmark: concurrent model calls — 8 agent tasks at ``maxConcurrency: 8`` against a local
OpenAI Responses server that answers each call after 1 s.

Each agent makes one model call (no tools), so the ideal execution time is one answer's
delay (1 s); the goal is < 2 s. The figure is the in-process run (``api.start_run``, compile
outside the clock), so it includes creating the database and the run, starting the worker
(started before the database is opened; the 8 calls share it) and its import of the provider
executor. The server is the test suite's wire-format fixture
(``tests/providers/agent_server.py``), on 127.0.0.1.

Run: ``python benchmarks/bench_providers.py [--agents 8] [--delay-s 1.0] [--runs 5]``.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the fixture server (tests/)

import benchkit
import yaml

from agentctl.core.dsl import load_workflow
from tests.providers.agent_server import AgentServer


def agents_batch(n: int, port: int) -> dict[str, Any]:
    """``n`` independent one-call agent tasks on an OpenAI provider at 127.0.0.1:``port``."""
    policy = {
        "approval": "never",
        "networkAllowlist": ["127.0.0.1"],
        "network": {"allowedPorts": [port], "allowPrivate": True},
    }
    provider = {"kind": "openai", "endpoint": f"http://127.0.0.1:{port}/v1/responses"}
    agent = {"provider": "main", "model": "m", "instructions": "Answer.", "maxTurns": 1}
    tasks = [{"id": f"a{i}", "uses": "agent:w", "with": {"prompt": f"q{i}"}} for i in range(n)]
    runtime = {"maxConcurrency": min(max(n, 1), 64)}
    doc = benchkit.document(
        "provider-batch", tasks, policy=policy, providers={"main": provider}, agents={"w": agent}
    )
    doc["spec"]["runtime"] = runtime
    # The document as `agentctl run` sees it: defaults filled in (credential, limits).
    return dict(load_workflow(yaml.safe_dump(doc)).document)


def main(
    agents: int = 8,
    delay_s: float = 1.0,
    runs: int = 5,
    budget_s: float = 120.0,
    workdir: Path | None = None,
) -> dict[str, Any]:
    os.environ.setdefault("OPENAI_API_KEY", "bench-key")
    server = AgentServer(delay=delay_s)
    try:
        doc = agents_batch(agents, server.port)
        with tempfile.TemporaryDirectory(dir=workdir) as tmp:
            once = lambda d: benchkit.run_inprocess(doc, d)  # noqa: E731
            timed = benchkit.series(runs, once, Path(tmp), "providers", budget_s)
        requests = len(server.seen)
    finally:
        server.close()
    note = f"ideal {delay_s:g} s, goal < {2 * delay_s:g} s; {requests} requests served"
    fig = benchkit.figure(f"provider_batch_{agents}_inprocess", "s", timed.seconds, note=note)
    return {"benchmark": "providers", "figures": [fig.to_json()]}


if __name__ == "__main__":
    defaults = {"agents": 8, "delay_s": 1.0, "runs": 5, "budget_s": 120.0}
    benchkit.module_cli(__doc__, main, defaults)
