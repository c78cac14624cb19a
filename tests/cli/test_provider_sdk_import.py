"""A model call's ``timeoutSeconds`` bounds the call, not the worker's import of its SDK.

The anthropic SDK takes about a second to import on a cold start; imported inside the call, it
used up a short ``timeoutSeconds`` before any request left, and the task failed with "effect
timed out after 1 s, before its request was sent" against a server that answers at once. Here
a stand-in package on ``PYTHONPATH`` (which workers inherit) makes the SDK's import slower
than the call's timeout, then hands the real SDK over: the call must still succeed.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.conftest import Cli
from tests.providers.agent_server import AgentServer

KEY = "sk-sdk-import-SECRET-7d1e04"

# Stands in for the SDK package: slow to import, then replaced by the real one.
SLOW_IMPORT = """\
import importlib, os, sys, time
time.sleep(2.5)  # longer than the agent's timeoutSeconds: 1
root = os.path.abspath(os.path.join(os.path.dirname(__file__), {up!r}))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != root]
del sys.modules[__name__]
sys.modules[__name__] = importlib.import_module(__name__)
"""

CASES = {
    # kind: (package path of the stand-in, key variable, endpoint path)
    "anthropic": ("anthropic", "ANTHROPIC_API_KEY", "/v1/messages"),
    "google": ("google/genai", "GEMINI_API_KEY", "/v1beta/models"),
}


def _workflow(kind: str, port: int, path: str) -> str:
    return f"""apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: {{ name: sdk-import }}
spec:
  policy:
    networkAllowlist: [127.0.0.1]
    network: {{ allowPrivate: true, allowedPorts: [{port}] }}
  providers:
    main: {{ kind: {kind}, endpoint: "http://127.0.0.1:{port}{path}" }}
  agents:
    asker: {{ provider: main, model: m-1, instructions: Answer., timeoutSeconds: 1 }}
  tasks:
    - {{ id: ask, uses: "agent:asker", with: {{ prompt: hello }} }}
"""


def _slow_sdk(root: Path, package: str) -> Path:
    """A ``PYTHONPATH`` entry whose ``package`` imports slowly, then is the real one."""
    pkg = root / "slow-sdk" / package
    pkg.mkdir(parents=True)
    up = os.sep.join([".."] * (package.count("/") + 1))
    (pkg / "__init__.py").write_text(SLOW_IMPORT.format(up=up), encoding="utf-8")
    return root / "slow-sdk"


@pytest.mark.parametrize("kind", sorted(CASES))
def test_a_slow_sdk_import_does_not_use_up_the_calls_timeout(
    cli: Cli, tmp_path: Path, kind: str
) -> None:
    package, key_env, path = CASES[kind]
    server = AgentServer()
    try:
        wf = tmp_path / "wf.yaml"
        wf.write_text(_workflow(kind, server.port, path), encoding="utf-8")
        shim = _slow_sdk(tmp_path, package)
        pythonpath = os.pathsep.join(filter(None, [str(shim), os.environ.get("PYTHONPATH")]))
        env = {key_env: KEY, "PYTHONPATH": pythonpath}
        done = cli("--output", "json", "run", str(wf), "--db", str(tmp_path / "r.db"), env=env)
        assert done.rc == 0, done.stderr
        assert done.data["output"]["ask"]["text"] == "done: hello"
        assert len(server.seen) == 1  # the one call, answered
    finally:
        server.close()
