"""Templates in an action's configuration and the ``with`` keys a kind reads (issue 14 item 6).

Black box, in a fresh directory: a foreach over a shell action whose ``args`` / ``env`` use
``${{ vars.item }}`` runs each child with its own value, as one argv element that no shell
re-parses, recorded (rendered) in the effect input; a ``with`` key the action kind does not
read fails ``check`` with exit 2 at its line and column, and so does a key it needs that the
task's merged ``with`` lacks or gives as a literal of the wrong kind.
"""

from __future__ import annotations

from pathlib import Path

from tests.conftest import Cli

PER_TASK = """\
apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: { name: per-task }
spec:
  policy: { approval: never, processAllowlist: [echo, sh], writableRoots: [out] }
  actions:
    greet: { kind: builtin.shell.exec, command: echo, args: ["hello ${{ vars.item }}", "${{ vars.foreachIndex }}"], timeoutSeconds: 5 }
    quote: { kind: builtin.shell.exec, command: sh, args: [-c, 'printf "%s|" "$WHO"'], env: { WHO: "${{ vars.item }}" }, timeoutSeconds: 5 }
    save: { kind: builtin.write, with: { path: "out/${{ vars.item }}.txt", content: "for ${{ vars.item }}" } }
  tasks:
    - { id: say, uses: "action:greet", foreach: { items: [ada, "lin; echo pwned"] } }
    - { id: env, uses: "action:quote", foreach: { items: ["$(echo pwned)", "b c"] } }
    - { id: keep, uses: "action:save", foreach: { items: [x, y] } }
"""


def _children(output: dict[str, object], parent: str) -> list[dict[str, object]]:
    return [output[k] for k in sorted(output) if k.startswith(f"{parent}--")]  # type: ignore[misc]


def test_foreach_children_of_a_shell_action_differ(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "wf.yaml").write_text(PER_TASK, encoding="utf-8")
    done = cli("--output", "json", "run", "wf.yaml", "--db", "db.sqlite")
    assert done.rc == 0, done.stderr
    output = done.data["output"]
    # Each rendered value is one argv element: `;` is text, never a shell separator.
    assert [c["stdout"] for c in _children(output, "say")] == [
        "hello ada 0\n",
        "hello lin; echo pwned 1\n",
    ]
    # Values reach `sh -c` through env, unexpanded by any shell and not redacted as secrets.
    assert [c["stdout"] for c in _children(output, "env")] == ["$(echo pwned)|", "b c|"]
    assert (tmp_path / "out" / "x.txt").read_text() == "for x"
    assert (tmp_path / "out" / "y.txt").read_text() == "for y"
    effects = cli("--output", "json", "effects", "list", done.data["runId"], "--db", "db.sqlite")
    recorded = {e["taskId"]: e["request"]["input"] for e in effects.data["effects"]}
    say = [recorded[k] for k in sorted(recorded) if k.startswith("say--")]
    assert [r["args"] for r in say] == [["hello ada", "0"], ["hello lin; echo pwned", "1"]]
    env = [recorded[k]["env"] for k in sorted(recorded) if k.startswith("env--")]
    assert env == [{"WHO": "$(echo pwned)"}, {"WHO": "b c"}]


def _diagnostics(cli: Cli, tmp_path: Path, text: str) -> list[dict[str, object]]:
    (tmp_path / "bad.yaml").write_text(text, encoding="utf-8")
    got = cli("--output", "json", "check", "bad.yaml")
    assert got.rc == 2, got.stdout
    assert not (tmp_path / ".agentctl").exists()
    return list(got.error["diagnostics"])


def test_a_with_key_on_a_shell_action_fails_check(cli: Cli, tmp_path: Path) -> None:
    bad = PER_TASK.replace(
        '- { id: say, uses: "action:greet",',
        '- { id: say, uses: "action:greet", with: { who: ada },',
    )
    (diag,) = _diagnostics(cli, tmp_path, bad)
    assert diag["code"] == "schema_violation" and diag["path"] == "spec.tasks.0.with.who"
    line = bad.splitlines()[10]
    assert (diag["line"], diag["column"]) == (11, line.index("ada }") + 1)
    assert "not read by a builtin.shell.exec action" in str(diag["message"])
    assert "args or env" in str(diag["help"])


def test_with_keys_a_kind_does_not_read_fail_check(cli: Cli, tmp_path: Path) -> None:
    misspelt = PER_TASK.replace('content: "for ', 'contents: "for ')
    diag, missing = _diagnostics(cli, tmp_path, misspelt)
    assert diag["path"] == "spec.actions.save.with.contents" and diag["line"] == 9
    assert "`content`, `path`" in str(diag["help"])
    # ... and the `content` it meant is then missing: the write could never run.
    assert missing["path"] == "spec.tasks.2.with" and "needs `with.content`" in str(
        missing["message"]
    )


NEEDS_WITH = """\
apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: { name: needs-with }
spec:
  policy: { approval: never, writableRoots: [out] }
  actions:
    peek: { kind: builtin.read }
    save: { kind: builtin.write, with: { path: out/a.txt } }
    check: { kind: builtin.assert }
    recall: { kind: builtin.memory.read }
    lookup: { kind: builtin.long_term_memory.read }
  tasks:
    - { id: peek, uses: "action:peek", with: { path: notes.txt } }
    - { id: save, uses: "action:save", with: { content: "${{ tasks.peek.output.content }}" }, needs: [peek] }
    - { id: check, uses: "action:check", with: { that: "${{ tasks.save.output.changed }}" }, needs: [save] }
    - { id: recall, uses: "action:recall", with: { key: seen } }
    - { id: lookup, uses: "action:lookup", with: { key: seen } }
"""


def test_a_with_key_the_kind_needs_is_required_at_check(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "wf.yaml").write_text(NEEDS_WITH, encoding="utf-8")
    assert cli("--output", "json", "check", "wf.yaml").rc == 0  # defaults merge under `with`
    cases = [
        ("with: { path: notes.txt }", "with: {}", "spec.tasks.0.with", "needs `with.path`"),
        ("with: { path: out/a.txt }", "with: {}", "spec.tasks.1.with", "needs `with.path`"),
        ('with: { content: "${{', 'with: { c: "${{', "spec.tasks.1.with", "`with.content`"),
        (
            'that: "${{ tasks.save.output.changed }}"',
            "that: 'yes'",
            "spec.tasks.2.with.that",
            "true or false",
        ),
        ("path: notes.txt", "path: 7", "spec.tasks.0.with.path", "must be a local file path"),
        ("path: notes.txt", "path: 'https://example.com/n'", "spec.tasks.0.with.path", "not a URL"),
        ('recall", with: { key: seen }', 'recall", with: {}', "spec.tasks.3.with", "`with.key`"),
        (
            'lookup", with: { key: seen }',
            "lookup\", with: { key: '' }",
            "spec.tasks.4.with.key",
            "non-empty",
        ),
    ]
    for old, new, path, message in cases:
        assert old in NEEDS_WITH, old
        found = [
            d
            for d in _diagnostics(cli, tmp_path, NEEDS_WITH.replace(old, new))
            if d["path"] == path
        ]
        assert len(found) == 1 and message in str(found[0]["message"]), (old, found)


def test_action_templates_follow_the_needs_rule(cli: Cli, tmp_path: Path) -> None:
    reads = PER_TASK.replace('"${{ vars.foreachIndex }}"', '"${{ tasks.keep.output.items }}"')
    codes = {(d["code"], d["path"]) for d in _diagnostics(cli, tmp_path, reads)}
    assert codes == {("invalid_template", "spec.actions.greet.args.1")}
    broken = PER_TASK.replace("${{ vars.foreachIndex }}", "${{ vars.foreachIndex")
    (diag,) = _diagnostics(cli, tmp_path, broken)
    assert diag["code"] == "invalid_template" and diag["path"] == "spec.actions.greet.args.1"


def test_an_object_in_an_argument_fails_the_task(cli: Cli, tmp_path: Path) -> None:
    text = PER_TASK.replace(
        '"hello ${{ vars.item }}", "${{ vars.foreachIndex }}"', '"${{ vars.matrix }}"'
    )
    text = text.replace(
        'foreach: { items: [ada, "lin; echo pwned"] }', "matrix: { axes: { n: [1] } }"
    )
    (tmp_path / "wf.yaml").write_text(text, encoding="utf-8")
    done = cli("--output", "json", "run", "wf.yaml", "--db", "db.sqlite")
    assert done.rc == 4
    assert "`args.0` must render to text" in done.error["error"]["message"]


IN_DIRS = """\
apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: { name: in-dirs }
spec:
  policy: { approval: never, processAllowlist: [pwd] }
  actions:
    where: { kind: builtin.shell.exec, command: /bin/pwd, cwd: "${{ vars.item }}", timeoutSeconds: 5 }
  tasks:
    - { id: here, uses: "action:where", foreach: { items: [a, b/c, "."] } }
"""


def test_a_templated_cwd_renders_per_task(cli: Cli, tmp_path: Path) -> None:
    """A ``cwd`` renders per task like ``args`` (it was taken as the literal text and every
    run denied it); the rendered directory is judged as a literal one: ``..`` is denied."""
    (tmp_path / "b" / "c").mkdir(parents=True)
    (tmp_path / "a").mkdir()
    (tmp_path / "wf.yaml").write_text(IN_DIRS, encoding="utf-8")
    done = cli("--output", "json", "run", "wf.yaml", "--db", "db.sqlite")
    assert done.rc == 0, done.stderr
    root = tmp_path.resolve()
    assert [c["stdout"] for c in _children(done.data["output"], "here")] == [
        f"{root / 'a'}\n",
        f"{root / 'b' / 'c'}\n",
        f"{root}\n",
    ]
    effects = cli("--output", "json", "effects", "list", done.data["runId"], "--db", "db.sqlite")
    assert sorted(e["request"]["input"]["cwd"] for e in effects.data["effects"]) == [
        ".",
        "a",
        "b/c",
    ]
    (tmp_path / "up.yaml").write_text(IN_DIRS.replace("b/c", "../"), encoding="utf-8")
    denied = cli("--output", "json", "run", "up.yaml", "--db", "db.sqlite")
    assert denied.rc == 4 and "contains '..'" in denied.error["error"]["message"]
    (tmp_path / "reads.yaml").write_text(IN_DIRS.replace("vars.item", "tasks.x.output"))
    refused = cli("--output", "json", "check", "reads.yaml")  # checked as args are
    assert refused.rc == 2, refused.stdout
    codes = {(d["code"], d["path"]) for d in refused.error["diagnostics"]}
    assert codes == {("missing_reference", "spec.actions.where.cwd")}
