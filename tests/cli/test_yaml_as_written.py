"""YAML as users write it (issue 14 item 5), through the CLI in a fresh directory.

Anchors and aliases expand; alias expansion is bounded so a "billion laughs" document is
refused (exit 2, ``yaml_syntax``, no state); a plain scalar where the schema wants a string is
taken as its text, while keys that take any JSON value keep the typed value; a plain mapping key
that looks like a number, boolean or null is its text as written, as the original reads it.
"""

from __future__ import annotations

from pathlib import Path

from tests.conftest import Cli

ANCHORED = """\
apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: { name: 1.10 }
spec:
  policy: { approval: never, processAllowlist: [true, echo] }
  actions:
    ok: { kind: builtin.shell.exec, command: true, timeoutSeconds: 5 }
    say: &say { kind: builtin.shell.exec, command: echo, args: [1.10, yes, true], timeoutSeconds: 5 }
    again: *say
    put: { kind: builtin.assign }
  tasks:
    - { id: quiet, uses: "action:ok" }
    - { id: talk, uses: "action:say" }
    - { id: echo2, uses: "action:again" }
    - { id: keep, uses: "action:put", with: &data { n: 1.10, b: true, list: [1, 2] } }
    - { id: copy, uses: "action:put", with: *data }
"""


def _laughs(levels: int) -> str:
    lines = ["    a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    for i in range(1, levels):
        lines.append(f"    a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]")
    return (
        "apiVersion: agentctl.dev/v1alpha1\nkind: Workflow\nmetadata: { name: lol }\n"
        "spec:\n  vars:\n" + "\n".join(lines) + "\n"
        "  actions: { p: { kind: builtin.assign } }\n"
        "  tasks: [ { id: x, uses: 'action:p' } ]\n"
    )


def test_anchors_aliases_and_plain_scalars_run(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "wf.yaml").write_text(ANCHORED, encoding="utf-8")
    done = cli("--output", "json", "run", "wf.yaml", "--db", "db.sqlite")
    assert done.rc == 0, done.stderr
    output = done.data["output"]
    # `true` in processAllowlist and as `command` is the program named true.
    assert output["quiet"]["exitCode"] == 0
    # Plain scalars in `args` are argv text as written: 1.10 stays "1.10", not 1.1.
    assert output["talk"]["stdout"] == "1.10 yes true\n"
    assert output["echo2"]["stdout"] == "1.10 yes true\n"
    # `with` takes any JSON value: the typed value stays typed.
    assert output["keep"]["output"] == {"n": 1.1, "b": True, "list": [1, 2]}
    assert output["copy"]["output"] == output["keep"]["output"]
    plan = cli("--output", "json", "plan", "wf.yaml")
    assert plan.rc == 0 and plan.data["name"] == "1.10"


def test_billion_laughs_fails_fast_without_state(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "lol.yaml").write_text(_laughs(10), encoding="utf-8")
    for command in ("check", "run"):
        got = cli("--output", "json", command, "lol.yaml")
        assert got.rc == 2, got.stderr
        (diag,) = got.error["diagnostics"]
        assert diag["code"] == "yaml_syntax" and "aliases expand" in diag["message"]
        assert diag["line"] >= 6 and diag["column"] >= 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["lol.yaml"]


def test_modest_alias_reuse_is_not_bounded(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "ok.yaml").write_text(_laughs(3), encoding="utf-8")
    assert cli("check", "ok.yaml").rc == 0


def test_alias_mistakes_keep_their_diagnostics(cli: Cli, tmp_path: Path) -> None:
    undefined = ANCHORED.replace("again: *say", "again: *nothing")
    (tmp_path / "undefined.yaml").write_text(undefined, encoding="utf-8")
    got = cli("--output", "json", "check", "undefined.yaml")
    (diag,) = got.error["diagnostics"]
    assert got.rc == 2 and diag["code"] == "yaml_syntax" and "undefined alias" in diag["message"]
    assert (diag["line"], diag["column"]) == (9, 12)
    merged = ANCHORED.replace("again: *say", "again: { <<: *say }")
    (tmp_path / "merged.yaml").write_text(merged, encoding="utf-8")
    got = cli("--output", "json", "check", "merged.yaml")
    assert got.rc == 2
    unknown = [d for d in got.error["diagnostics"] if "unknown key `<<`" in d["message"]]
    assert [d["code"] for d in unknown] == ["schema_violation"]


def test_a_repeated_anchor_name_redefines_it(cli: Cli, tmp_path: Path) -> None:
    redefined = ANCHORED.replace(
        "with: *data }",
        'with: &data { n: 2 } }\n    - { id: last, uses: "action:put", with: *data }',
    )
    (tmp_path / "wf.yaml").write_text(redefined, encoding="utf-8")
    done = cli("--output", "json", "run", "wf.yaml", "--db", "db.sqlite")
    assert done.rc == 0, done.stderr
    assert done.data["output"]["last"]["output"] == {"n": 2}


def test_quoted_and_structured_values_stay_strict(cli: Cli, tmp_path: Path) -> None:
    wrong = ANCHORED.replace("metadata: { name: 1.10 }", "metadata: { name: [1] }").replace(
        "timeoutSeconds: 5 }\n    say", 'timeoutSeconds: "5" }\n    say'
    )
    (tmp_path / "wrong.yaml").write_text(wrong, encoding="utf-8")
    got = cli("--output", "json", "check", "wrong.yaml")
    assert got.rc == 2
    paths = sorted(d["path"] for d in got.error["diagnostics"])
    assert paths == ["metadata.name", "spec.actions.ok.timeoutSeconds"]


def test_plain_scalars_are_text_as_written_without_anchors_too(cli: Cli, tmp_path: Path) -> None:
    # No "&" or "*": the document takes the libyaml path, which must keep the plain texts too.
    plain = (
        "\n".join(
            line for line in ANCHORED.splitlines() if "again" not in line and "echo2" not in line
        )
        .replace("&data ", "")
        .replace("&say ", "")
        .replace("with: *data", "with: { n: 1.10, b: true, list: [1, 2] }")
    )
    assert "&" not in plain and "*" not in plain
    (tmp_path / "wf.yaml").write_text(plain + "\n", encoding="utf-8")
    done = cli("--output", "json", "run", "wf.yaml", "--db", "db.sqlite")
    assert done.rc == 0, done.stderr
    assert done.data["output"]["talk"]["stdout"] == "1.10 yes true\n"
    assert done.data["output"]["keep"]["output"] == {"n": 1.1, "b": True, "list": [1, 2]}
    plan = cli("--output", "json", "plan", "wf.yaml")
    assert plan.rc == 0 and plan.data["name"] == "1.10"


PLAIN_KEYS = """\
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: { name: keys, labels: { 2024: x } }
spec:
  actions: { put: { kind: builtin.assign } }
  tasks:
    - { id: t, uses: "action:put", with: { 1: a, true: b, 0x10: c } }
"""


def test_plain_mapping_keys_are_their_text(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "wf.yaml").write_text(PLAIN_KEYS, encoding="utf-8")
    done = cli("--output", "json", "run", "wf.yaml", "--db", "db.sqlite")
    assert done.rc == 0, done.stderr
    assert done.data["output"]["t"]["output"] == {"1": "a", "true": "b", "0x10": "c"}
    twice = PLAIN_KEYS.replace("0x10: c", "'1': c")
    (tmp_path / "twice.yaml").write_text(twice, encoding="utf-8")
    got = cli("--output", "json", "check", "twice.yaml")
    assert got.rc == 2
    (diag,) = got.error["diagnostics"]
    assert (diag["code"], diag["path"], diag["line"]) == ("yaml_syntax", "spec.tasks.0.with.1", 7)
    assert "duplicate key '1'" in diag["message"]
