"""The coordinator's worker pool decodes frames with the wire models' stored schemas
(``agentctl/mailbox/wirecache.py``, ADR 0013 item 8), as its workers do.

Building the ``Message`` union's validator on the first frame cost 20-40 ms on the path of
every run's first worker effect. Each case runs a real pool, with a real worker, in a fresh
interpreter (which models are built is process state), its user cache in ``tmp_path``.
"""

from __future__ import annotations

import copy
import os
import pickle
import subprocess
import sys
from pathlib import Path

from agentctl.mailbox import prebuilt, wirecache

WARM_ONE_WORKER = """
import trio
from agentctl.coordinator.workerpool import open_worker_pool
from agentctl.errors import AgentctlError

async def main():
    async with open_worker_pool(1) as pool:
        await pool.warm(1)

try:
    trio.run(main)
except* AgentctlError as group:  # the warm-up starts its workers in a nursery
    print(group.exceptions[0].message)
else:
    print("greeted")
"""

FILL_STORE = "from agentctl.mailbox import wirecache; wirecache.prepare_wire_models()"

OPEN_ONLY = """
import trio
from agentctl.coordinator.workerpool import open_worker_pool

async def main():
    async with open_worker_pool(1):
        pass

trio.run(main)
"""


def _python(code: str, cache: Path) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTCTL_")}
    env["XDG_CACHE_HOME"] = str(cache)
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def _store(cache: Path) -> Path:
    return cache / "agentctl" / wirecache.FILE_NAME


def test_a_pool_fills_an_empty_store_before_any_worker_starts(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    _python(OPEN_ONLY, cache)  # no worker started: the pool built the schemas itself
    assert _store(cache).read_bytes().startswith(wirecache.fingerprint())
    assert _python(WARM_ONE_WORKER, cache) == "greeted"  # and both ends use them


def test_the_pool_decodes_with_the_stored_union(tmp_path: Path) -> None:
    """The control: a store whose union refuses every real pid in a ``Hello`` makes the pool
    refuse its worker's greeting, so the union the pool decodes with is the stored one (the
    worker's own ``Hello`` model, which builds the frame, is left as it was)."""
    cache = tmp_path / "cache"
    _python(FILL_STORE, cache)
    key, stored = _store(cache).read_bytes().split(b"\n", 1)
    schemas = pickle.loads(stored)
    # The union's own copy: the pickle shares the model schemas it holds with theirs.
    schemas[prebuilt.UNION] = copy.deepcopy(schemas[prebuilt.UNION])
    hello = schemas[prebuilt.UNION]["choices"]["hello"]["schema"]["fields"]
    hello["pid"]["schema"]["lt"] = 0
    _store(cache).write_bytes(key + b"\n" + pickle.dumps(schemas))
    said = _python(WARM_ONE_WORKER, cache)
    assert said.startswith("worker process ") and "failed to start: malformed frame" in said
