"""JSON Schema through the ``jsonschema`` package (issue 14 item 10), through the CLI.

Every schema a workflow writes (task ``outputSchema``, agent ``structuredOutput``, tool and
extension schemas, sub-workflow boundaries) is Draft 2020-12: keywords beyond the old
hand-written subset work at run time, and our strictness holds at ``check`` — an unknown
keyword or a reference outside the schema fails with exit 2 and the keyword's location.
The package is imported only when a workflow has a schema, so plain ``check`` stays fast.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from tests.conftest import EXAMPLES, Cli, cli_env

HEAD = "apiVersion: agentctl.dev/v1\nkind: Workflow\nmetadata: { name: js }\nspec:\n"

AGENT = (
    HEAD
    + """  providers: { sim: { kind: fake } }
  agents:
    scout:
      provider: sim
      model: m
      instructions: Answer.
      structuredOutput:
        type: object
        properties:
          verdict: { $ref: "https://schemas.example.test/verdict.json" }
      providerOptions: { finalText: '{"verdict":"go"}' }
  tasks:
    - { id: scan, uses: "agent:scout", with: { prompt: inspect } }
"""
)

TOOL = (
    HEAD
    + """  providers: { sim: { kind: fake } }
  tools:
    peek:
      kind: builtin.workspace.read
      inputSchema:
        type: object
        properties: { path: { type: string, maxLenght: 64 } }
        required: [path]
        additionalProperties: false
  agents:
    scout: { provider: sim, model: m, instructions: Answer., tools: [peek] }
  tasks:
    - { id: scan, uses: "agent:scout", with: { prompt: inspect } }
"""
)

# Draft 2020-12 beyond the old subset: $defs + $ref, if/then, dependentRequired.
CONTRACT = (
    HEAD
    + """  inputs: { level: 3, extra: false }
  actions: { put: { kind: builtin.assign } }
  tasks:
    - id: grade
      uses: "action:put"
      with: { level: "${{ inputs.level }}", note: hi, extra: "${{ inputs.extra }}" }
      outputSchema:
        $defs:
          level: { type: integer, minimum: 1, maximum: 5 }
        type: object
        properties:
          output:
            type: object
            properties: { level: { $ref: "#/$defs/level" } }
            if: { properties: { extra: { const: true } } }
            then: { required: [reason] }
            dependentRequired: { note: [level] }
"""
)


def _diagnostic(cli: Cli, path: Path) -> dict[str, object]:
    done = cli("--output", "json", "check", str(path))
    assert done.rc == 2, done.stderr
    (diagnostic,) = done.error["diagnostics"]
    assert diagnostic["code"] == "schema_violation"
    return dict(diagnostic)


def test_a_remote_ref_in_structured_output_fails_check_at_the_ref(
    cli: Cli, write_workflow: Callable[..., Path]
) -> None:
    found = _diagnostic(cli, write_workflow(AGENT))
    assert found["path"] == "spec.agents.scout.structuredOutput.properties.verdict.$ref"
    assert "points outside this schema" in str(found["message"])
    assert found["line"] == 14 and isinstance(found["column"], int)


def test_an_unknown_keyword_in_a_tool_schema_fails_check_at_the_keyword(
    cli: Cli, write_workflow: Callable[..., Path]
) -> None:
    found = _diagnostic(cli, write_workflow(TOOL))
    assert found["path"] == "spec.tools.peek.inputSchema.properties.path.maxLenght"
    assert "unknown schema keyword `maxLenght`" in str(found["message"])
    assert found["line"] == 11


def test_an_unresolvable_local_ref_in_an_output_schema_fails_check(
    cli: Cli, write_workflow: Callable[..., Path]
) -> None:
    path = write_workflow(CONTRACT.replace('"#/$defs/level"', '"#/$defs/lvl"'))
    found = _diagnostic(cli, path)
    assert found["path"] == "spec.tasks.0.outputSchema.properties.output.properties.level.$ref"
    assert "'#/$defs/lvl' does not resolve inside this schema" in str(found["message"])


def test_draft_2020_12_contracts_hold_at_run_time(
    cli: Cli, write_workflow: Callable[..., Path]
) -> None:
    path = write_workflow(CONTRACT)
    ok = cli("--output", "json", "run", str(path))
    assert ok.rc == 0, ok.stderr
    assert ok.data["state"] == "succeeded"
    too_high = cli("--output", "json", "run", str(path), "--input", "level=9")
    assert too_high.rc == 4
    assert "/output/level: 9 must be <= 5" in too_high.stderr
    needs_reason = cli("--output", "json", "run", str(path), "--input", "extra=true")
    assert needs_reason.rc == 4
    assert "missing required property 'reason'" in needs_reason.stderr


def _imports_jsonschema(path: Path, cwd: Path, *command: str) -> bool:
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "agentctl", *(command or ("check",)), str(path)],
        cwd=cwd,
        env=cli_env(),
        capture_output=True,
        text=True,
        check=True,
    )
    return any(line.rstrip().endswith("| jsonschema") for line in done.stderr.splitlines())


def test_the_package_is_imported_only_for_workflows_with_schemas(
    tmp_path: Path, write_workflow: Callable[..., Path]
) -> None:
    assert not _imports_jsonschema(EXAMPLES / "hello.yaml", tmp_path)
    assert _imports_jsonschema(write_workflow(CONTRACT), tmp_path)
    # Running checks every task's output against its default contract (`type: object`)
    # without the package.
    plain = CONTRACT.split("      outputSchema:")[0]
    assert not _imports_jsonschema(write_workflow(plain, "plain.yaml"), tmp_path, "run")
