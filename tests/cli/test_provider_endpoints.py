"""A provider endpoint whose path its adapter would refuse is refused by ``check`` (exit 2,
located at the endpoint), as by ``doctor`` and ``providers inspect``, which compile the same.

Before, only the worker knew the rule: these passed ``check``, ``doctor`` and ``providers
inspect`` (runnable: true) and failed at dispatch, after the run existed and a
``providerRequests`` unit was charged.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import EXAMPLES, Cli

WRONG = [
    ("openai", "http://127.0.0.1:8765/v1"),
    ("openai", "http://127.0.0.1:8765/v1/chat/completions"),
    ("openai", "http://127.0.0.1:8765/v1/responses?x=1"),
    ("anthropic", "http://127.0.0.1:8765/v1"),
    ("google", "http://127.0.0.1:8765/v1"),
    ("google", "http://127.0.0.1:8765/models"),  # no API version before it
]


@pytest.mark.parametrize(("kind", "endpoint"), WRONG)
def test_a_wrong_endpoint_path_is_refused_before_any_run(
    cli: Cli, tmp_path: Path, kind: str, endpoint: str
) -> None:
    text = (EXAMPLES / "providers" / f"{kind}.yaml").read_text(encoding="utf-8")
    [line] = [x for x in text.splitlines() if x.strip().startswith("endpoint:")]
    wf = tmp_path / "wf.yaml"
    wf.write_text(text.replace(line, f"      endpoint: {endpoint}"), encoding="utf-8")
    for command in (("check",), ("doctor",), ("providers", "inspect")):
        refused = cli("--output", "json", *command, str(wf))
        assert refused.rc == 2, (command, refused.stdout, refused.stderr)
        [diag] = refused.error["diagnostics"]
        assert diag["path"] == "spec.providers.main.endpoint", diag
        assert f"an {kind} endpoint ends with" in diag["message"] or "a google" in diag["message"]
    assert not (tmp_path / ".agentctl").exists()


@pytest.mark.parametrize("kind", ["openai", "anthropic", "google"])
def test_the_bundled_endpoints_pass(cli: Cli, kind: str) -> None:
    checked = cli("--output", "json", "check", str(EXAMPLES / "providers" / f"{kind}.yaml"))
    assert checked.rc == 0, checked.stderr
