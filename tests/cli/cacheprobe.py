"""Running a probe of a start-up cache in a fresh process, with its own user cache directory.

Shared by the tests of the start-up caches (``agentctl/usercache.py``): the probe prints one
JSON object, which is returned; a probe that fails fails the test with its stderr.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.conftest import cli_env


def probe_json(
    args: list[str], cache: Path, env: dict[str, str] | None = None
) -> dict[str, object]:
    """Run ``python ARGS`` with ``XDG_CACHE_HOME`` at ``cache`` (and ``env``)."""
    done = subprocess.run(
        [sys.executable, *args],
        env=cli_env({"XDG_CACHE_HOME": str(cache), **(env or {})}),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    found: dict[str, object] = json.loads(done.stdout)
    return found
