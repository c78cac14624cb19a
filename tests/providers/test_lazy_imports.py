"""`agentctl check` stays fast: nothing the CLI or the registry loads imports an SDK."""

from __future__ import annotations

import subprocess
import sys

HEAVY = ("openai", "anthropic", "google.genai", "httpx2", "httpcore2")


def test_cli_and_registry_import_no_provider_sdk() -> None:
    code = (
        "import sys, agentctl.cli, agentctl.core.registry, agentctl.workers.serve\n"
        f"print([m for m in {HEAVY!r} if m in sys.modules])"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
