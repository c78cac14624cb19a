"""Mistakes the compiler can see, refused by ``check`` and ``run`` before anything exists.

Each document here used to pass ``check`` and fail only once ``run`` had created a database and
a run (exit 4). Now both commands exit 2 with a diagnostic located at the offending value, and
``run`` leaves the directory as it found it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import Cli

HEAD = "apiVersion: agentctl.dev/v1alpha1\nkind: Workflow\nmetadata: {name: t}\nspec:\n"

# case → (the spec's body, diagnostic code, its path, text its message must hold)
CASES: dict[str, tuple[str, str, str, str]] = {
    "engine-variable-without-expansion": (
        "  actions: {p: {kind: builtin.assign}}\n"
        '  tasks: [{id: a, uses: "action:p", with: {x: "${{ vars.loopIndex }}"}}]\n',
        "invalid_template",
        "spec.tasks.0.with.x",
        "vars.loopIndex",
    ),
    "subworkflow-invocations-sharing-a-memory-prefix": (
        "  actions: {m: {kind: builtin.memory.write}}\n"
        "  policy: {approval: never}\n"
        "  subworkflows: {s: {version: 1.0.0, inputs: {v: 0}, tasks:"
        ' [{id: w, uses: "action:m", with: {key: k, value: "${{ inputs.v }}"}}]}}\n'
        '  tasks: [{id: x-y, uses: "workflow:s", with: {v: 1}},'
        ' {id: x_y, uses: "workflow:s", with: {v: 2}}]\n',
        "schema_violation",
        "spec.tasks.1.id",
        "`x-y` and `x_y`",
    ),
    "subworkflow-reading-an-undeclared-input": (
        "  actions: {p: {kind: builtin.assign}}\n"
        "  subworkflows: {s: {version: 1.0.0, tasks:"
        ' [{id: e, uses: "action:p", with: {x: "${{ inputs.zz }}"}}]}}\n'
        '  tasks: [{id: w, uses: "workflow:s"}]\n',
        "missing_reference",
        "spec.subworkflows.s.tasks.0.with.x",
        "inputs.zz",
    ),
    "env-secret-outside-the-allowlist": (
        "  policy: {approval: never, processAllowlist: [printenv], environmentAllowlist: [X]}\n"
        "  actions: {p: {kind: builtin.shell.exec, command: printenv, args: [A],"
        " env: {A: {env: Y}}}}\n"
        '  tasks: [{id: a, uses: "action:p"}]\n',
        "invalid_secret_reference",
        "spec.actions.p.env.A",
        "environmentAllowlist",
    ),
    "empty-writable-root": (
        '  policy: {approval: never, writableRoots: [""]}\n'
        "  actions: {p: {kind: builtin.write}}\n"
        '  tasks: [{id: a, uses: "action:p", with: {path: x.txt, content: hi}}]\n',
        "schema_violation",
        "spec.policy.writableRoots.0",
        "empty",
    ),
}


def _listing(root: Path) -> dict[str, tuple[int, int]]:
    return {
        str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns) for p in root.rglob("*")
    }


@pytest.mark.parametrize("case", sorted(CASES))
def test_check_and_run_refuse(cli: Cli, tmp_path: Path, case: str) -> None:
    body, code, path, text = CASES[case]
    (tmp_path / "wf.yaml").write_text(HEAD + body, encoding="utf-8")
    before = _listing(tmp_path)
    for command in ("check", "run"):
        done = cli("--output", "json", command, "wf.yaml")
        assert done.rc == 2, (command, done.stdout, done.stderr)
        found = [(d["code"], d["path"]) for d in done.error["diagnostics"]]
        assert (code, path) in found, found
        assert any(text in d["message"] for d in done.error["diagnostics"]), done.stderr
    assert _listing(tmp_path) == before  # `run` created no database, no run
