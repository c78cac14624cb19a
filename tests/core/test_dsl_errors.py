"""Every way a workflow source can be wrong yields a ValidationError whose diagnostics carry the
right code, dotted path and 1-based line/column (computed here from the source text itself).
"""

from __future__ import annotations

import pytest
from test_dsl_examples import EXAMPLES, HEAD

from agentctl.core.dsl import MAX_SOURCE_BYTES, load_workflow
from agentctl.errors import Diagnostic, ValidationError

MINIMAL = HEAD + "metadata: { name: m }\nspec:\n  tasks:\n    - id: a\n      uses: action:x\n"


def diagnostics(source: str | bytes) -> list[Diagnostic]:
    with pytest.raises(ValidationError) as info:
        load_workflow(source, "wf.yaml")
    found = info.value.diagnostics
    assert found, "a ValidationError must carry at least one diagnostic"
    assert all(d.file == "wf.yaml" for d in found)
    assert "\n" not in info.value.message
    return found


def only(source: str | bytes) -> Diagnostic:
    found = diagnostics(source)
    assert len(found) == 1, [d.message for d in found]
    return found[0]


def position(source: str, needle: str, nth: int = 1) -> tuple[int, int]:
    """1-based line and column of the ``nth`` occurrence of ``needle`` in ``source``."""
    offset = -1
    for _ in range(nth):
        offset = source.index(needle, offset + 1)
    line = source.count("\n", 0, offset) + 1
    return line, offset - (source.rfind("\n", 0, offset) + 1) + 1


def check(diag: Diagnostic, code: str, path: str | None, where: tuple[int, int]) -> None:
    assert (diag.code, diag.path, (diag.line, diag.column)) == (code, path, where), diag


# --- YAML level -----------------------------------------------------------------------------


def test_malformed_yaml_points_at_the_problem() -> None:
    source = MINIMAL + "\tbroken: here\n"
    check(only(source), "yaml_syntax", None, position(source, "\tbroken"))
    unclosed = HEAD + "metadata: { name: x\nspec: { tasks: [] }\n"
    diag = only(unclosed)
    assert diag.code == "yaml_syntax" and diag.line == 4


def test_binary_garbage_and_bad_utf8() -> None:
    check(only(b"\x89PNG\r\n\x1a\n\x00\x00\xff"), "yaml_syntax", None, (1, 1))
    check(only(b"apiVersion: x\nkind: \xff\xfe"), "yaml_syntax", None, (2, 7))
    check(only("kind: Workflow\x00\n"), "yaml_syntax", None, (1, 15))


def test_a_two_mib_source_is_refused_before_parsing() -> None:
    # Not YAML at all: it would be a yaml_syntax error if the size check ran after parsing.
    huge = "{[" * (1024 * 1024)
    for source in (huge, huge.encode()):
        diag = only(source)
        assert diag.code == "schema_violation" and (diag.line, diag.column) == (1, 1)
        assert str(MAX_SOURCE_BYTES) in diag.message


def test_a_source_of_exactly_the_limit_is_parsed() -> None:
    padding = MAX_SOURCE_BYTES - len(MINIMAL.encode()) - 2
    source = MINIMAL + "#" + "x" * padding + "\n"
    assert len(source.encode()) == MAX_SOURCE_BYTES
    assert load_workflow(source).document["metadata"]["name"] == "m"


def test_duplicate_keys_are_reported_at_the_second_key() -> None:
    source = MINIMAL.replace("      uses:", "      with: { a: 1, a: 2 }\n      uses:")
    source += "metadata: { name: again }\n"
    first, second = diagnostics(source)
    check(first, "yaml_syntax", "spec.tasks.0.with.a", position(source, "a: 2"))
    check(second, "yaml_syntax", "metadata", position(source, "metadata", 2))


@pytest.mark.parametrize(
    ("fragment", "message"),
    [
        ("x: *a", "undefined alias"),
        ("x: !!binary aGk=", "unsupported tag"),
        ("x: !custom 1", "unsupported tag"),
        ("x: .inf", "finite"),
        ("!custom 1: one", "unsupported tag '!custom' on mapping key"),
        ("? [a, b]\n        : one", "a mapping key must be a scalar, not a sequence"),
        ("? {a: b}\n        : one", "a mapping key must be a scalar, not a mapping"),
    ],
)
def test_unsupported_yaml_constructs(fragment: str, message: str) -> None:
    source = MINIMAL.replace("      uses:", f"      with:\n        {fragment}\n      uses:")
    diag = only(source)
    assert diag.code == "yaml_syntax" and message in diag.message
    # Each problem is reported on the fragment's first line (line 8).
    assert diag.line == position(source, fragment.splitlines()[0])[0] == 8


@pytest.mark.parametrize("fragment", ["x: .inf", "x: -.Inf", "x: .nan", "x: " + "9" * 50])
def test_a_number_json_cannot_hold_is_located_by_path_too(fragment: str) -> None:
    source = MINIMAL.replace("      uses:", f"      with: {{ {fragment} }}\n      uses:")
    check(only(source), "yaml_syntax", "spec.tasks.0.with.x", position(source, fragment[3:]))


def test_plain_keys_typed_as_numbers_booleans_or_null_are_their_text() -> None:
    """The original reads maps into string keys, so ``{1: a}`` has the key "1": the text as
    written, never a re-spelt number (``0x10`` stays "0x10", ``1.50`` stays "1.50")."""
    keys = "{ 1: a, true: b, 0x10: c, 1.50: d, ~: e, False: f }"
    source = MINIMAL.replace("{ name: m }", "{ name: m, labels: { 2024: x } }").replace(
        "      uses:", f"      with: {keys}\n      uses:"
    )
    loaded = load_workflow(source, "wf.yaml")
    assert loaded.document["metadata"]["labels"] == {"2024": "x"}
    with_ = loaded.document["spec"]["tasks"][0]["with"]
    assert with_ == {"1": "a", "true": "b", "0x10": "c", "1.50": "d", "~": "e", "False": "f"}
    assert loaded.locate("spec.tasks.0.with.0x10") == position(source, "c,")


@pytest.mark.parametrize(("plain", "quoted"), [("1", "'1'"), ("true", '"true"'), ("~", "'~'")])
def test_a_plain_key_and_its_quoted_text_are_one_key_twice(plain: str, quoted: str) -> None:
    source = MINIMAL.replace(
        "      uses:", f"      with: {{ {plain}: a, {quoted}: b }}\n      uses:"
    )
    diag = only(source)
    check(diag, "yaml_syntax", f"spec.tasks.0.with.{plain}", position(source, f"{quoted}:"))
    assert f"duplicate key {plain!r}" in diag.message


def test_multiple_documents_and_empty_or_non_mapping_documents() -> None:
    assert only(MINIMAL + "---\na: 1\n").code == "yaml_syntax"
    check(only(""), "yaml_syntax", None, (1, 1))
    check(only("- just\n- a list\n"), "schema_violation", None, (1, 1))


# --- schema level ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("old", "new", "path", "needle"),
    [
        ("kind: Workflow\n", "kind: Workflow\nextra: 1\n", "extra", "extra"),
        ("{ name: m }", "{ name: m, nmae: n }", "metadata.nmae", "nmae"),
        ("spec:\n", "spec:\n  concurrency: 2\n", "spec.concurrency", "concurrency"),
        (
            "      uses:",
            "      retry: { tries: 2 }\n      uses:",
            "spec.tasks.0.retry.tries",
            "tries",
        ),
        (
            "spec:\n",
            "spec:\n  policy:\n    network: { allowPrivate: false, proxy: true }\n",
            "spec.policy.network.proxy",
            "proxy",
        ),
        (
            "spec:\n",
            "spec:\n  actions:\n    x: { kind: builtin.assign, with: {}, bogus: 1 }\n",
            "spec.actions.x.bogus",
            "bogus",
        ),
    ],
)
def test_unknown_keys_point_at_the_key(old: str, new: str, path: str, needle: str) -> None:
    source = MINIMAL.replace(old, new, 1)
    diag = only(source)
    check(diag, "schema_violation", path, position(source, needle))
    assert needle in diag.message and diag.help and "allowed keys" in diag.help


@pytest.mark.parametrize(
    ("fragment", "path"),
    [
        (
            "providers:\n    o: { kind: openai, credential: { env: OPENAI_API_KEY, envv: y } }",
            "spec.providers.o.credential.envv",
        ),
        (
            "providers:\n    o: { kind: openai, credential: { file: x, note: y } }",
            "spec.providers.o.credential.note",
        ),
        (
            "providers:\n    o: { kind: fake, headers: { X-K: { process: { command: x }, note: y } } }",
            "spec.providers.o.headers.X-K.note",
        ),
        (
            "actions:\n    x: { kind: builtin.shell.exec, command: echo, env: { A: { env: A, envv: y } } }",
            "spec.actions.x.env.A.envv",
        ),
        (
            "tools:\n    t: { kind: builtin.echo, inputSchema: {}, secrets: [{ file: x, note: y }] }",
            "spec.tools.t.secrets.0.note",
        ),
        (
            "policy:\n    network: { customCa: { env: A, envv: y } }",
            "spec.policy.network.customCa.envv",
        ),
    ],
)
def test_an_unknown_key_in_a_secret_reference_is_named_where_it_is(
    fragment: str, path: str
) -> None:
    """The union tag ``env``/``file``/``process`` is also a real key of the reference: the walk
    from pydantic's location back to the source once followed it into the key's value."""
    source = MINIMAL.replace("spec:\n", f"spec:\n  {fragment}\n", 1)
    key = path.rpartition(".")[2]
    diag = next(d for d in diagnostics(source) if d.path and d.path.endswith(f".{key}"))
    check(diag, "schema_violation", path, position(source, f"{key}: y"))
    assert diag.message == f"unknown key `{key}` in `{path.rpartition('.')[0]}`"
    assert "allowed keys here: env, file, process" in (diag.help or "")


def test_python_field_names_are_not_accepted_as_keys() -> None:
    for fragment, needle in (("runtime: { max_concurrency: 2 }", "max_concurrency"),):
        source = MINIMAL.replace("spec:\n", f"spec:\n  {fragment}\n")
        check(only(source), "schema_violation", f"spec.runtime.{needle}", position(source, needle))
    with_ = MINIMAL + "      with_: { a: 1 }\n"
    check(only(with_), "schema_violation", "spec.tasks.0.with_", position(with_, "with_"))


def test_an_unknown_key_holding_dots_is_named_as_written() -> None:
    """An unquoted comma in a flow mapping makes the rest of a value a key of its own, dots and
    all: the message names that key and the mapping it is in, not a path split at its dots."""
    source = MINIMAL.replace("{ name: m }", "{ name: m, description: A nap, then a write. }")
    found = only(source)
    check(found, "schema_violation", "metadata.then a write.", position(source, "then a write."))
    assert found.message == "unknown key `then a write.` in `metadata`"
    assert "allowed keys here: name, description, labels" in (found.help or "")


def test_unknown_key_suggests_the_closest_known_key() -> None:
    source = MINIMAL.replace("spec:\n", "spec:\n  runtime: { maxConcurency: 2 }\n")
    assert "did you mean `maxConcurrency`" in (only(source).help or "")


@pytest.mark.parametrize(
    ("fragment", "path", "needle", "expected"),
    [
        ('runtime: { maxConcurrency: "3" }', "spec.runtime.maxConcurrency", '"3"', "integer"),
        ("runtime: { maxConcurrency: true }", "spec.runtime.maxConcurrency", "true", "integer"),
        ("output: { verbose: 1 }", "spec.output.verbose", "1 }", "true or false"),
        ("output: { verbose: yes }", "spec.output.verbose", "yes", "true or false"),
        ("policy: { writableRoots: out }", "spec.policy.writableRoots", "out", "list"),
        ("inputs: [1]", "spec.inputs", "[1]", "mapping"),
        ("runtime: { maxConcurrency: 1.0 }", "spec.runtime.maxConcurrency", "1.0", "integer"),
    ],
)
def test_wrong_types_are_not_coerced(fragment: str, path: str, needle: str, expected: str) -> None:
    source = MINIMAL.replace("spec:\n", f"spec:\n  {fragment}\n")
    diag = only(source)
    check(diag, "schema_violation", path, position(source, needle))
    assert expected in diag.message and "got" in diag.message


def test_a_number_in_a_message_is_spelled_as_written() -> None:
    """Not as Python's repr (``1e-05``): as the workflow's JSON writes it (``0.00001``)."""
    source = MINIMAL.replace("spec:\n", "spec:\n  runtime: { maxConcurrency: 0.00001 }\n")
    assert only(source).message.endswith("must be an integer, got the number 0.00001")


@pytest.mark.parametrize(
    ("fragment", "path", "needle"),
    [
        ("runtime: { maxConcurrency: 65 }", "spec.runtime.maxConcurrency", "65"),
        ("runtime: { maxConcurrency: 0 }", "spec.runtime.maxConcurrency", "0 }"),
        (
            "runtime: { defaultTimeoutSeconds: 86401 }",
            "spec.runtime.defaultTimeoutSeconds",
            "86401",
        ),
        ("runtime: { budgets: { maxTasks: 0 } }", "spec.runtime.budgets.maxTasks", "0 }"),
        ("policy: { approval: sometimes }", "spec.policy.approval", "sometimes"),
        (
            "policy: { network: { connectTimeoutSeconds: 121 } }",
            "spec.policy.network.connectTimeoutSeconds",
            "121",
        ),
        (
            "memory: { longTerm: { embedding: { dimensions: 7 } } }",
            "spec.memory.longTerm.embedding.dimensions",
            "7 }",
        ),
    ],
)
def test_ranges_and_enums(fragment: str, path: str, needle: str) -> None:
    source = MINIMAL.replace("spec:\n", f"spec:\n  {fragment}\n")
    check(only(source), "schema_violation", path, position(source, needle))


@pytest.mark.parametrize(
    ("task_extra", "path", "needle"),
    [
        ("retry: { maxAttempts: 21 }", "spec.tasks.0.retry.maxAttempts", "21"),
        ("retry: { backoffMs: 60001 }", "spec.tasks.0.retry.backoffMs", "60001"),
        ("timeoutSeconds: 0", "spec.tasks.0.timeoutSeconds", "0\n"),
        ("failure: ignore", "spec.tasks.0.failure", "ignore"),
        ("foreach: { items: [1, 2], maxItems: 1 }", "spec.tasks.0.foreach.items", "[1, 2]"),
        ("foreach: { items: [1], as: matrix }", "spec.tasks.0.foreach.as", "matrix }"),
        ("needs: [b, b]", "spec.tasks.0.needs", "[b, b]"),
        ("vars: { loopIndex: 1 }", "spec.tasks.0.vars.loopIndex", "loopIndex"),
        ("loop: { maxIterations: 65, while: x }", "spec.tasks.0.loop.maxIterations", "65"),
    ],
)
def test_task_rules(task_extra: str, path: str, needle: str) -> None:
    source = MINIMAL + f"      {task_extra}\n"
    check(only(source), "schema_violation", path, position(source, needle))


def test_missing_keys_point_at_the_enclosing_mapping() -> None:
    source = MINIMAL.replace("      uses: action:x\n", "")
    diag = only(source)
    check(diag, "schema_violation", "spec.tasks.0.uses", position(source, "id: a"))
    assert "uses" in diag.message


def test_invalid_task_id_and_uses() -> None:
    source = MINIMAL.replace("id: a", "id: 9lives").replace("action:x", "module:x")
    first, second = diagnostics(source)
    check(first, "schema_violation", "spec.tasks.0.id", position(source, "9lives"))
    check(second, "schema_violation", "spec.tasks.0.uses", position(source, "module:x"))


_DIGEST = "sha256:" + "a" * 64


@pytest.mark.parametrize(
    ("old", "new", "code", "path"),
    [
        ("id: a", 'id: "a\\n"', "schema_violation", "spec.tasks.0.id"),
        ("action:x", '"action:x\\n"', "schema_violation", "spec.tasks.0.uses"),
        (
            "      uses: action:x\n",
            '      uses: action:x\n      matrix: { axes: { "os\\n": [linux] } }\n',
            "schema_violation",
            "spec.tasks.0.matrix.axes.os\n",
        ),
        (
            "spec:\n",
            f'spec:\n  actions: {{ x: {{ kind: builtin.shell.exec, command: ls, isolation: container, container: {{ image: "{_DIGEST}\\n" }} }} }}\n',
            "schema_violation",
            "spec.actions.x.container.image",
        ),
        (
            "spec:\n",
            'spec:\n  actions: { x: { kind: builtin.shell.exec, command: ls, env: { K: { env: "HOME\\n" } } } }\n',
            "invalid_secret_reference",
            "spec.actions.x.env.K.env",
        ),
        (
            "spec:\n",
            'spec:\n  subworkflows: { s: { version: "1.0.0\\n", tasks: [ { id: a, uses: action:x } ] } }\n',
            "schema_violation",
            "spec.subworkflows.s.version",
        ),
    ],
)
def test_a_trailing_newline_does_not_pass_a_name_pattern(
    old: str, new: str, code: str, path: str
) -> None:
    # Python's `$` also matches before a final "\n"; ids, names and digests must not end in one
    # (a task id "a\n" would reach the ledger).
    source = MINIMAL.replace(old, new, 1)
    found = diagnostics(source)
    assert (found[0].code, found[0].path) == (code, path), found


@pytest.mark.parametrize(
    ("version", "valid"),
    [("1.0.0-0", True), ("1.0.0-rc.10", True), ("1.0.0-0a", True), ("1.0.0-01", False)],
)
def test_a_numeric_pre_release_identifier_has_no_leading_zero(version: str, valid: bool) -> None:
    source = MINIMAL.replace(
        "spec:\n",
        f"spec:\n  subworkflows: {{ s: {{ version: {version}, tasks: [ {{ id: a, uses: action:x }} ] }} }}\n",
    )
    if valid:
        load_workflow(source)
    else:
        check(
            only(source),
            "schema_violation",
            "spec.subworkflows.s.version",
            position(source, version),
        )


def test_envelope_rules() -> None:
    bad_version = MINIMAL.replace("v1alpha1", "v2")
    diag = only(bad_version)
    check(diag, "unsupported_version", "apiVersion", position(bad_version, "agentctl.dev/v2"))
    assert "agentctl.dev/v1alpha1" in (diag.help or "")
    no_version = MINIMAL.replace("apiVersion: agentctl.dev/v1alpha1\n", "")
    assert "agentctl.dev/v1alpha1" in (only(no_version).help or "")
    wrong_kind = MINIMAL.replace("kind: Workflow", "kind: Playbook")
    check(only(wrong_kind), "schema_violation", "kind", position(wrong_kind, "Playbook"))
    empty_name = MINIMAL.replace("name: m", 'name: ""')
    check(only(empty_name), "schema_violation", "metadata.name", position(empty_name, '""'))
    no_tasks = HEAD + "metadata: { name: m }\nspec: { tasks: [] }\n"
    check(only(no_tasks), "schema_violation", "spec.tasks", position(no_tasks, "[]"))


def test_all_problems_are_reported_in_source_order() -> None:
    source = MINIMAL.replace("{ name: m }", "{ name: m, x: 1 }") + "      failure: maybe\n"
    source = source.replace("spec:\n", "spec:\n  runtime: { maxConcurrency: 99 }\n")
    found = diagnostics(source)
    assert [d.path for d in found] == [
        "metadata.x",
        "spec.runtime.maxConcurrency",
        "spec.tasks.0.failure",
    ]
    assert [d.line for d in found] == sorted(d.line or 0 for d in found)


SEVERAL = (
    HEAD
    + """metadata: { name: m }
spec:
  providers: { sim: { kind: fake } }
  agents: { g: { provider: sim, model: m, instructions: x, reasoning: { effort: low } } }
  actions: { put: { kind: builtin.assign } }
  tasks:
    - { id: a, uses: "action:put", bogus: 1 }
    - { id: b, uses: "action:put", memoryWrites: [k] }
    - { id: c, uses: "agent:g", other: 2 }
"""
)


def test_a_schema_error_does_not_hide_the_document_rules_on_other_parts() -> None:
    # The schema's errors first (the first diagnostic is what it always was), then what the
    # document rules find on the parts valid on their own, each group in source order.
    found = diagnostics(SEVERAL)
    assert [(d.code, d.path) for d in found] == [
        ("schema_violation", "spec.tasks.0.bogus"),
        ("schema_violation", "spec.tasks.2.other"),
        ("unsupported_capability", "spec.agents.g.reasoning"),
        ("schema_violation", "spec.tasks.1.memoryWrites"),
    ]
    assert (found[2].line, found[2].column) == position(SEVERAL, "reasoning")
    assert (found[3].line, found[3].column) == position(SEVERAL, "memoryWrites")


def test_a_part_the_schema_refused_is_not_judged_by_the_rules() -> None:
    # An invalid action, provider or policy is left out: nothing that follows from it is said.
    source = SEVERAL.replace("{ kind: builtin.assign }", "{ kind: builtin.assign, x: 1 }")
    source = source.replace("{ kind: fake }", "{ kind: fake, y: 1 }")
    assert [d.path for d in diagnostics(source)] == [
        "spec.providers.sim.y",
        "spec.actions.put.x",
        "spec.tasks.0.bogus",
        "spec.tasks.2.other",
    ]
    server = '  mcpServers: { m: { url: "https://h.example", headers: { A: { file: k } } } }\n'
    secret = SEVERAL.replace("spec:\n", "spec:\n" + server)
    header = "spec.mcpServers.m.headers.A"  # a file secret needs policy.secretFileRoots
    assert header in [d.path for d in diagnostics(secret)]
    no_policy = secret.replace("spec:\n", "spec:\n  policy: { approval: sometimes }\n")
    assert header not in [d.path for d in diagnostics(no_policy)]
    # Nor is anything salvaged when the envelope failed: it may be another format entirely.
    assert len(diagnostics(SEVERAL.replace("v1alpha1", "v9"))) == 3


# --- the failing variants of spec/dsl.md §10 -------------------------------------------------


def test_e9_process_key_on_an_assign_action() -> None:
    source = EXAMPLES["e9"].replace(
        "actions: {", "actions: { put: { kind: builtin.assign, stdoutLimitBytes: 1024 },"
    )
    diag = only(source)
    check(
        diag,
        "schema_violation",
        "spec.actions.put.stdoutLimitBytes",
        position(source, "stdoutLimitBytes"),
    )
    assert "builtin.assign" in diag.message


@pytest.mark.parametrize("kind", ["builtin.assign", "builtin.assert", "builtin.memory.read"])
def test_a_timeout_on_a_pure_action_is_misplaced(kind: str) -> None:
    # The registry's pure kinds are evaluated in place: a timeout would be accepted and ignored.
    source = EXAMPLES["e9"].replace(
        "actions: {", f"actions: {{ put: {{ kind: {kind}, timeoutSeconds: 5 }},"
    )
    diag = only(source)
    check(
        diag,
        "schema_violation",
        "spec.actions.put.timeoutSeconds",
        position(source, "timeoutSeconds"),
    )
    assert kind in diag.message
    load_workflow(source.replace("timeoutSeconds: 5 }", "}"), "wf.yaml")


@pytest.mark.parametrize(
    ("given", "keys"),
    [
        ("retry: { maxAttempts: 2 }", ["retry"]),
        ("timeoutSeconds: 3", ["timeoutSeconds"]),
        ("timeoutSeconds: 3, retry: { maxAttempts: 2 }", ["retry", "timeoutSeconds"]),
        ("outputSchema: { type: object }, timeoutSeconds: 3", ["timeoutSeconds"]),
    ],
)
def test_a_routers_retry_or_timeout_is_a_warning(given: str, keys: list[str]) -> None:
    # Valid task keys the original accepts, so a workflow written for it still loads; but a
    # router has nothing to retry or bound, so each is reported at its key. Its outputSchema
    # has an effect (it replaces the fixed contract, spec §4.13): no warning.
    written = "{ id: pick, uses: router, "
    source = EXAMPLES["e2"].replace(written, f"{written}{given}, ")
    warnings = load_workflow(source, "wf.yaml").warnings
    assert [(w.severity, w.path) for w in warnings] == [
        ("warning", f"spec.tasks.2.{key}") for key in keys
    ]
    line, column = position(source, written)
    assert (warnings[0].line, warnings[0].column) == (
        line,
        column + len(written) + given.index(f"{keys[0]}:"),
    )
    assert "router" in warnings[0].message
    # A default-valued retry says nothing (a normalized document spells it out): no warning.
    plain = EXAMPLES["e2"].replace(written, f"{written}retry: {{ maxAttempts: 1 }}, ")
    assert load_workflow(plain, "wf.yaml").warnings == []


@pytest.mark.parametrize(
    ("key", "value", "code", "needle"),
    [
        ("cwd", "'https://example.com/work'", "schema_violation", "'https"),
        ("command", "'https://example.com/echo'", "schema_violation", "'https"),
        ("command", "''", "schema_violation", "''"),
        ("env", "{ A: { file: 'file:///k' } }", "invalid_secret_reference", "'file:"),
    ],
)
def test_a_url_where_a_local_path_belongs_is_refused(
    key: str, value: str, code: str, needle: str
) -> None:
    # Nothing is ever fetched: a URL (or nothing) where a program, directory or file is
    # expected fails `check` at the key, instead of running a path no one meant.
    source = EXAMPLES["e9"].replace("timeoutSeconds: 5,", f"timeoutSeconds: 5, {key}: {value},")
    if key == "command":
        source = source.replace("command: /bin/echo, ", "")
    source = source.replace("policy: {", "policy: { secretFileRoots: [s],")
    diag = only(source)
    assert diag.code == code and diag.path is not None
    assert diag.path.startswith(f"spec.actions.hello.{key}")
    assert (diag.line, diag.column) == position(source, needle)


def test_an_extension_key_on_another_kind_is_misplaced_not_unsupported() -> None:
    # extension.process is implemented: its keys elsewhere are a schema error (§3 "Misplaced
    # keys ⇒ schema error"), not a capability this version lacks.
    source = EXAMPLES["e9"].replace("stdoutLimitBytes: 1024", "protocolVersion: x")
    diag = only(source)
    check(
        diag,
        "schema_violation",
        "spec.actions.hello.protocolVersion",
        position(source, "protocolVersion"),
    )
    assert "builtin.shell.exec" in diag.message and "extension.process" in diag.message


def test_e9_unpinned_container_image() -> None:
    container = "isolation: container, container: { image: 'busybox:latest' }"
    source = EXAMPLES["e9"].replace("stdoutLimitBytes: 1024", container)
    diag = only(source)
    check(
        diag, "schema_violation", "spec.actions.hello.container.image", position(source, "'busybox")
    )
    pinned = source.replace("busybox:latest", "localhost/busybox@sha256:" + "ab" * 32)
    assert (
        load_workflow(pinned).document["spec"]["actions"]["hello"]["container"]["pidsLimit"] == 64
    )


def test_container_and_isolation_go_together_and_env_avoids_engine_variables() -> None:
    alone = EXAMPLES["e9"].replace("stdoutLimitBytes: 1024", "isolation: container")
    check(
        only(alone),
        "schema_violation",
        "spec.actions.hello.isolation",
        position(alone, "container"),
    )
    image = "'sha256:" + "0" * 64 + "'"
    env = f"isolation: container, container: {{ image: {image} }}, env: {{ DOCKER_HOST: {{ env: X }} }}"
    source = EXAMPLES["e9"].replace("stdoutLimitBytes: 1024", env)
    diag = only(source)
    assert diag.path == "spec.actions.hello.env.DOCKER_HOST" and diag.code == "schema_violation"


def test_e2_reasoning_on_a_fake_agent() -> None:
    source = EXAMPLES["e2"].replace("maxTurns: 2,", "maxTurns: 2, reasoning: { effort: low },")
    diag = only(source)
    check(
        diag, "unsupported_capability", "spec.agents.scout.reasoning", position(source, "reasoning")
    )


def test_provider_options_outside_the_allow_list() -> None:
    source = EXAMPLES["e2"].replace("finalText:", "store: true, finalText:")
    diag = only(source)
    check(
        diag,
        "unsupported_capability",
        "spec.agents.scout.providerOptions.store",
        position(source, "store"),
    )
    typed = EXAMPLES["e8"].replace("failFirst: 1", "failFirst: -1")
    check(
        only(typed),
        "schema_violation",
        "spec.agents.w.providerOptions.failFirst",
        position(typed, "-1"),
    )


@pytest.mark.parametrize(
    ("extra", "key"),
    [
        (", retry: { maxAttempts: 2 }", "retry"),
        (", when: inputs.x", "when"),
        (", vars: { a: 1 }", "vars"),
    ],
)
def test_e5_invoking_task_carries_only_needs_with_failure(extra: str, key: str) -> None:
    source = EXAMPLES["e5"].replace("with: { word: hi } }", f"with: {{ word: hi }}{extra} }}")
    check(
        only(source),
        "schema_violation",
        f"spec.tasks.0.{key}",
        position(source, f"{key}:"),
    )


def test_e5_subworkflow_version_must_be_semver() -> None:
    source = EXAMPLES["e5"].replace("version: 0.1.0", "version: v1")
    check(
        only(source), "schema_violation", "spec.subworkflows.shout.version", position(source, "v1,")
    )


@pytest.mark.parametrize("key", ["inputSchema", "outputSchema"])
def test_a_subworkflow_boundary_schema_is_checked_at_its_definition(key: str) -> None:
    # No task invokes `s`: its definition is held to the rules all the same, and the error
    # names the definition's key, not a task that invokes it.
    source = MINIMAL + (
        f"  subworkflows:\n    s: {{ version: 1.0.0, {key}: {{ type: bogus }}, "
        "tasks: [ { id: e, uses: action:x } ] }\n"
    )
    check(
        only(source),
        "schema_violation",
        f"spec.subworkflows.s.{key}.type",
        position(source, "bogus"),
    )


def test_shape_exclusivity_rules() -> None:
    both = EXAMPLES["e3"].replace(
        "foreach: { items: [dev, prod], as: env, maxItems: 2 }",
        "foreach: { items: [a] }, matrix: { axes: { x: [1] } }",
    )
    check(only(both), "schema_violation", "spec.tasks.2.matrix", position(both, "matrix:"))
    no_route = EXAMPLES["e2"].replace(
        '{ id: publish, uses: "action:pass"', '{ id: publish, uses: "router"'
    )
    check(only(no_route), "schema_violation", "spec.tasks.3.uses", position(no_route, '"router"'))
    loop_when = EXAMPLES["e4"].replace(
        "initial: { n: 0 } },", "initial: { n: 0 } }, when: inputs.go,"
    )
    check(only(loop_when), "schema_violation", "spec.tasks.0.loop", position(loop_when, "loop:"))
    matrix = EXAMPLES["e3"].replace("maxItems: 4", "maxItems: 3")
    line, column = position(matrix, "maxItems: 3")
    check(only(matrix), "schema_violation", "spec.tasks.3.matrix.maxItems", (line, column + 10))


def test_memory_writes_only_on_memory_write_tasks() -> None:
    source = EXAMPLES["e3"].replace(
        '{ id: fan, uses: "action:put",', '{ id: fan, uses: "action:put", memoryWrites: [k],'
    )
    check(
        only(source),
        "schema_violation",
        "spec.tasks.2.memoryWrites",
        position(source, "memoryWrites"),
    )
    allowed = EXAMPLES["e3"].replace(
        "with: { key: left, value: L }", "memoryWrites: [left], with: { key: left, value: L }"
    )
    assert load_workflow(allowed).document["spec"]["tasks"][0]["memoryWrites"] == ["left"]
    # An unknown action is the compiler's missing_reference, not a schema error here.
    unknown = EXAMPLES["e3"].replace(
        '{ id: fan, uses: "action:put",', '{ id: fan, uses: "action:nope", memoryWrites: [k],'
    )
    load_workflow(unknown)


def test_tool_rules() -> None:
    loose = EXAMPLES["e2"].replace(
        "required: [path], additionalProperties: false", "required: [path]"
    )
    check(
        only(loose),
        "schema_violation",
        "spec.tools.peek.inputSchema",
        position(loose, "{ type: object, properties: { path"),
    )
    optional = EXAMPLES["e2"].replace(
        "required: [path], additionalProperties", "required: [], additionalProperties"
    )
    assert "required" in only(optional).message
    mismatch = EXAMPLES["e2"].replace("effectClass: observe", "effectClass: pure")
    check(
        only(mismatch),
        "schema_violation",
        "spec.tools.peek.effectClass",
        position(mismatch, "pure"),
    )


def test_late_features_are_refused_not_ignored() -> None:
    signed = MINIMAL.replace(
        "spec:\n",
        "spec:\n  packs: [ { name: ex.p, version: 1.0.0, source: { path: p }, signature: { bundle: b } } ]\n",
    )
    check(
        only(signed),
        "unsupported_capability",
        "spec.packs.0.signature",
        position(signed, "signature"),
    )


# --- secret references ----------------------------------------------------------------------


def _with_provider(provider: str, policy: str = "{}") -> str:
    return MINIMAL.replace(
        "spec:\n", f"spec:\n  policy: {policy}\n  providers: {{ o: {provider} }}\n"
    )


@pytest.mark.parametrize(
    ("credential", "needle"),
    [
        ("'OPENAI_API_KEY'", "'OPENAI"),
        ("{ env: A, file: b }", "{ env: A"),
        ("{ secret: A }", "{ secret"),
        ("{ env: 'not valid' }", "'not valid'"),
    ],
)
def test_malformed_secret_references(credential: str, needle: str) -> None:
    source = _with_provider(f"{{ kind: openai, credential: {credential} }}")
    diag = only(source)
    assert diag.code == "invalid_secret_reference" and diag.path is not None
    assert diag.path.startswith("spec.providers.o.credential")
    assert (diag.line, diag.column) == position(source, needle)


def test_secret_references_need_their_policy() -> None:
    file_ref = _with_provider("{ kind: openai, credential: { file: /s/key } }")
    check(
        only(file_ref),
        "invalid_secret_reference",
        "spec.providers.o.credential",
        position(file_ref, "{ file"),
    )
    assert load_workflow(file_ref.replace("policy: {}", "policy: { secretFileRoots: [/s] }"))
    process = _with_provider("{ kind: openai, credential: { process: { command: /bin/vault } } }")
    diag = only(process)
    assert diag.code == "invalid_secret_reference" and "vault" in diag.message
    ok = process.replace("policy: {}", "policy: { secretProcessAllowlist: [vault] }")
    assert (
        load_workflow(ok).document["spec"]["providers"]["o"]["credential"]["process"][
            "timeoutSeconds"
        ]
        == 5
    )
    ca = MINIMAL.replace("spec:\n", "spec:\n  policy: { network: { customCa: { env: CA } } }\n")
    assert only(ca).code == "invalid_secret_reference"


def test_an_env_secret_the_static_policy_does_not_list_is_refused_where_nothing_preflights_it() -> (
    None
):
    # The policy is in the document: an action's env naming an unlisted variable is denied by
    # every run, so check refuses it.
    action = (
        "  policy: { processAllowlist: [printenv], environmentAllowlist: [X] }\n"
        "  actions: { p: { kind: builtin.shell.exec, command: printenv, env: { A: { env: Y } } } }\n"
    )
    source = MINIMAL.replace("spec:\n", "spec:\n" + action).replace("action:x", "action:p")
    diag = only(source)
    check(diag, "invalid_secret_reference", "spec.actions.p.env.A", position(source, "{ env: Y"))
    assert "$Y" in diag.message and "environmentAllowlist" in diag.message
    assert load_workflow(source.replace("environmentAllowlist: [X]", "environmentAllowlist: [Y]"))
    # A provider's credential and headers are pre-flighted instead (spec/cli.md §1, §12): an
    # unlisted one is `missing_or_denied` to `auth check` and exit 6 to `run`, and only when a
    # task reaches the provider — so the document itself loads.
    assert load_workflow(_with_provider("{ kind: openai, headers: { H: { env: TOKEN } } }"))
    assert load_workflow(_with_provider("{ kind: openai, credential: { env: MY_KEY } }"))


# A policy entry that names no directory or no variable → where it is reported.
BAD_POLICY_ENTRIES = {
    'writableRoots: [out, ""]': "spec.policy.writableRoots.1",
    'writableRoots: ["  "]': "spec.policy.writableRoots.0",
    'writableRoots: [out, ".."]': "spec.policy.writableRoots.1",
    'writableRoots: ["out/../../x"]': "spec.policy.writableRoots.0",
    'writableRoots: ["out/../y"]': "spec.policy.writableRoots.0",
    "environmentAllowlist: [OK_1, 1BAD]": "spec.policy.environmentAllowlist.1",
    'environmentAllowlist: ["A-B"]': "spec.policy.environmentAllowlist.0",
    'environmentAllowlist: [""]': "spec.policy.environmentAllowlist.0",
    'secretFileRoots: [""]': "spec.policy.secretFileRoots.0",
    'secretFileRoots: [keys, " "]': "spec.policy.secretFileRoots.1",
}


@pytest.mark.parametrize("policy", sorted(BAD_POLICY_ENTRIES))
def test_policy_roots_and_variable_names_are_checked(policy: str) -> None:
    source = MINIMAL.replace("spec:\n", f"spec:\n  policy: {{ {policy} }}\n")
    diag = only(source)
    assert (diag.code, diag.path) == ("schema_violation", BAD_POLICY_ENTRIES[policy]), diag


def test_an_absolute_writable_root_may_name_any_directory() -> None:
    """`..` is refused in a workspace-relative entry only: an absolute one is a mount."""
    source = MINIMAL.replace("spec:\n", 'spec:\n  policy: { writableRoots: ["/srv/a/../b"] }\n')
    assert load_workflow(source)
