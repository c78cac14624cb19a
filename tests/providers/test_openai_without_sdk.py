"""The OpenAI and Azure OpenAI adapters speak the wire format themselves: a call made in a
fresh interpreter answers correctly and never imports the ``openai`` SDK."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.conftest import REPO

CALL = """
import json, sys, trio
from tests.providers import fixtures as fx
from tests.providers.fixtures import FixtureServer, Reply
from tests.providers.test_provider_adapters import ASK, BY_KIND, execute, request_for
from agentctl.workers.executors import executor_for

server = FixtureServer()
texts = []
for kind in ("openai", "azure_openai"):
    d = BY_KIND[kind]
    server.script(Reply(body=fx.openai_text("hi from " + kind)))
    msg = execute(d, request_for(d, server, ASK))
    outcome = trio.run(executor_for(msg), msg)
    texts.append(outcome.output["text"])
server.close()
print(json.dumps({"texts": texts, "sdk": "openai" in sys.modules}))
"""


def test_a_call_does_not_import_the_sdk() -> None:
    done = subprocess.run(
        [sys.executable, "-c", CALL], cwd=REPO, capture_output=True, text=True, check=True
    )
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found == {"texts": ["hi from openai", "hi from azure_openai"], "sdk": False}
