"""An agent's `usage` keeps its documented shape whatever answer an operator records (CLI, tmp dir).

spec/dsl.md §5: an agent task without `structuredOutput` outputs `{text, usage: {inputTokens,
outputTokens, reasoningTokens, cacheReadTokens, cacheWriteTokens, costMicrousd}}`, and its
provider session sums the same five counters (docs/providers.md). A model call left uncertain
(here: cut by the agent's `timeoutSeconds`) and reconciled `applied` with an answer that leaves
counters out (they count 0, spec/cli.md §4) or adds a key of its own (`totalTokens`, a budget
counter's name) must still give that shape: a counter left out is 0, not missing, and a foreign
key is no token count, summed into neither the task's output nor the session.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import Cli

WORKFLOW = """\
apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: { name: usage-shape }
spec:
  providers: { sim: { kind: fake } }
  agents:
    slow: { provider: sim, model: m, instructions: Answer., maxTurns: 1, timeoutSeconds: 1,
      providerOptions: { delayMs: 20000 } }
  tasks:
    - { id: ask, uses: "agent:slow", with: { prompt: go } }
"""
COUNTERS = {"inputTokens", "outputTokens", "reasoningTokens", "cacheReadTokens", "cacheWriteTokens"}


def test_a_reconciled_answer_gives_every_usage_counter_and_no_other(
    cli: Cli, tmp_path: Path
) -> None:
    (tmp_path / "wf.yaml").write_text(WORKFLOW, encoding="utf-8")
    cut = cli("--output", "json", "run", "wf.yaml", "--db", "r.db")
    assert cut.rc == 4, (cut.stdout, cut.stderr)
    run_id = cut.error["error"]["runId"]
    [effect] = cli("--output", "json", "effects", "list", run_id, "--db", "r.db").data["effects"]
    assert effect["status"] == "uncertain"
    answer = {
        "finish": "complete",
        "text": "from the operator",
        "toolCalls": [],
        "usage": {"inputTokens": 3, "outputTokens": 4, "totalTokens": 7},
    }
    (tmp_path / "answer.json").write_text(json.dumps(answer), encoding="utf-8")
    settled = cli(
        *("effects", "reconcile", effect["effectId"], "--db", "r.db", "--status", "applied"),
        *("--reason", "the provider's log shows it", "--result-file", "answer.json"),
    )
    assert settled.rc == 0, settled.stderr
    done = cli("--output", "json", "resume", run_id, "--db", "r.db")
    assert done.rc == 0, done.stderr
    usage = done.data["output"]["ask"]["usage"]
    assert usage == {
        "inputTokens": 3,
        "outputTokens": 4,
        "reasoningTokens": 0,
        "cacheReadTokens": 0,
        "cacheWriteTokens": 0,
        "costMicrousd": None,
    }
    seen = cli("--output", "json", "inspect", run_id, "--db", "r.db").data
    [session] = seen["providerSessions"]
    assert session["usage"] == {name: usage[name] for name in COUNTERS}
    assert seen["budget"]["usage"]["totalTokens"] == 7  # the budget's own counter, input + output
