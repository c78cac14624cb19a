"""``maxCostMicrousd`` holds only over priced calls: with it set, every agent's
provider/model must have a price, and a pricing key must name a declared provider.

Before, ``check`` accepted both: an agent on an unpriced model ran with cost 0 under the cap
(``unpricedProviderRequests`` counted it), and a key for a provider that does not exist
priced nothing.
"""

from __future__ import annotations

from pathlib import Path

from tests.conftest import Cli, CliResult

RATE = "{ inputMicrousdPerMillionTokens: 1, outputMicrousdPerMillionTokens: 1 }"
WORKFLOW = """\
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: { name: priced }
spec:
  runtime:
    budgets: { BUDGETS }
    pricing: { version: v1, models: { MODELS } }
  policy: { approval: never }
  providers: { main: { kind: fake } }
  agents:
    a: { provider: main, model: m1, instructions: Answer. }
  tasks: [ { id: t, uses: "agent:a", with: { prompt: go } } ]
"""


def _check(cli: Cli, tmp_path: Path, budgets: str, models: str) -> CliResult:
    text = WORKFLOW.replace("BUDGETS", budgets).replace("MODELS", models)
    (tmp_path / "wf.yaml").write_text(text, encoding="utf-8")
    return cli("--output", "json", "check", "wf.yaml")


def test_a_cost_cap_with_an_unpriced_agent_model_is_refused_at_check(
    cli: Cli, tmp_path: Path
) -> None:
    got = _check(cli, tmp_path, "maxCostMicrousd: 1000", f"main/other: {RATE}")
    assert got.rc == 2, got.stderr
    [diag] = got.error["diagnostics"]
    assert diag["path"] == "spec.agents.a.model"
    assert "main/m1" in diag["message"] and "maxCostMicrousd" in diag["message"]


def test_priced_by_name_or_kind_passes(cli: Cli, tmp_path: Path) -> None:
    for key in ("main/m1", "fake/m1"):
        got = _check(cli, tmp_path, "maxCostMicrousd: 1000", f"{key}: {RATE}")
        assert got.rc == 0, got.stderr
    # Without a cost cap an unpriced model is allowed: it only counts as unpriced.
    got = _check(cli, tmp_path, "maxProviderRequests: 5", f"main/other: {RATE}")
    assert got.rc == 0, got.stderr


def test_a_pricing_key_for_an_undeclared_provider_is_refused(cli: Cli, tmp_path: Path) -> None:
    got = _check(cli, tmp_path, "maxProviderRequests: 5", f"main/m1: {RATE}, nosuch/m1: {RATE}")
    assert got.rc == 2, got.stderr
    [diag] = got.error["diagnostics"]
    assert "'nosuch/m1' names no provider" in diag["message"]
    assert diag["path"] == "spec.runtime.pricing.models.nosuch/m1"
