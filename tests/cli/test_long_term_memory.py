"""Long-term memory (issue 14 item 2), through the CLI in a fresh directory.

Workflows write entries (plain values or typed content, searchable text, metadata, a
retention), search them in text / vector / hybrid mode with ``limit`` and ``filters`` over the
credential-free ``local_hash`` embedding, and promote a result into working memory under
``memoryWrites``; ``agentctl memory get|put|search|reindex`` administers the same store.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from tests.clibackend import LedgerTarget
from tests.conftest import Cli

HEAD = """\
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: { name: recall }
spec:
  policy: { approval: never }
"""

WRITE = (
    HEAD
    + """\
  memory: { longTerm: { namespace: support, retentionDays: 30 } }
  actions: { remember: { kind: builtin.long_term_memory.write } }
  tasks:
    - { id: w1, uses: "action:remember", with: { key: notes, content: { type: text, text: "customer prefers concise release notes" }, metadata: { team: docs } } }
    - { id: w2, uses: "action:remember", with: { key: window, value: { day: friday }, text: "the deployment window is friday", metadata: { team: ops } } }
    - { id: w3, uses: "action:remember", with: { key: oncall, value: "release captain rotates weekly", metadata: { team: ops, level: 2 }, retentionDays: 1 } }
"""
)

SEARCH = (
    HEAD
    + """\
  memory: { longTerm: { namespace: support, embedding: { provider: local_hash, dimensions: DIMS } } }
  actions: { find: { kind: builtin.long_term_memory.search } }
  outputs: { found: "${{ tasks.find.output.results }}" }
  tasks:
    - { id: find, uses: "action:find", with: WITH }
"""
)

PROMOTE = (
    HEAD
    + """\
  memory: { longTerm: { namespace: support } }
  actions:
    find: { kind: builtin.long_term_memory.search }
    promote: { kind: builtin.long_term_memory.promote }
  tasks:
    - { id: find, uses: "action:find", with: { query: "release notes", mode: hybrid, limit: 1 } }
    - { id: keep, uses: "action:promote", needs: [find], memoryWrites: [recalled], with: { key: KEY, value: "${{ tasks.find.output.results }}" } }
"""
)


def _run(cli: Cli, tmp_path: Path, text: str, name: str = "wf.yaml") -> Any:
    (tmp_path / name).write_text(text, encoding="utf-8")
    return cli("--output", "json", "run", name, "--db", "m.db")


def _written(cli: Cli, tmp_path: Path) -> None:
    done = _run(cli, tmp_path, WRITE, "write.yaml")
    assert done.rc == 0, done.stderr


def _search(cli: Cli, tmp_path: Path, with_: str, dims: int = 64) -> Any:
    done = _run(cli, tmp_path, SEARCH.replace("WITH", with_).replace("DIMS", str(dims)))
    return done


def _keys(results: list[dict[str, Any]]) -> list[str]:
    return [r["key"] for r in results]


def _get(cli: Cli, key: str) -> Any:
    return cli("--output", "json", "memory", "get", "support", key, "--db", "m.db")


def _days_between(start: str, end: str) -> float:
    parse = lambda t: datetime.fromisoformat(t.replace("Z", "+00:00"))  # noqa: E731
    return (parse(end) - parse(start)) / timedelta(days=1)


def test_writes_keep_value_text_metadata_and_retention(cli: Cli, tmp_path: Path) -> None:
    _written(cli, tmp_path)
    notes = _get(cli, "notes")
    assert notes.rc == 0, notes.stderr
    data = notes.data
    assert data["value"] == data["text"] == "customer prefers concise release notes"
    assert data["metadata"] == {"team": "docs"}
    assert data["embedding"] == {
        "provider": "local_hash",
        "model": "local-hash-v1",
        "dimensions": 64,
    }
    assert _days_between(data["updatedAt"], data["expiresAt"]) == 30  # spec retentionDays
    oncall = _get(cli, "oncall").data
    assert _days_between(oncall["updatedAt"], oncall["expiresAt"]) == 1  # the task's own
    window = _get(cli, "window").data
    assert (
        window["value"] == {"day": "friday"} and window["text"] == "the deployment window is friday"
    )


def test_expired_entries_are_neither_read_nor_found(
    cli: Cli, ledger_target: LedgerTarget, tmp_path: Path
) -> None:
    _written(cli, tmp_path)
    ledger_target.sql(  # time passes: oncall's day is over
        tmp_path / "m.db",
        "UPDATE long_term_memory SET expires_at = '2000-01-01T00:00:00.000Z' WHERE key = 'oncall'",
    )
    gone = _get(cli, "oncall")
    assert gone.rc == 0, gone.stderr  # as the original: absent or expired reads as null
    assert gone.data["key"] == "oncall" and gone.data["value"] is None
    assert gone.data["createdAt"] is None and gone.data["expiresAt"] is None
    found = _search(cli, tmp_path, '{ query: "release", mode: text }')
    assert found.rc == 0, found.stderr
    assert _keys(found.data["output"]["found"]) == ["notes"]


def test_text_vector_and_hybrid_search_with_limit_and_filters(cli: Cli, tmp_path: Path) -> None:
    _written(cli, tmp_path)
    text = _search(cli, tmp_path, '{ query: "deployments release", mode: text }')
    assert text.rc == 0, text.stderr
    results = text.data["output"]["found"]
    # Token overlap: "release" matches two entries equally (order by key), "deployments" none.
    assert _keys(results) == ["notes", "oncall"]
    assert [r["score"] for r in results] == [500_000, 500_000]
    vector = _search(cli, tmp_path, '{ query: "deployments", mode: vector }')
    # local_hash shares word fragments: "deployments" is nearest to "deployment".
    assert _keys(vector.data["output"]["found"])[0] == "window"
    hybrid = _search(cli, tmp_path, '{ query: "release notes", mode: hybrid, limit: 1 }')
    (best,) = hybrid.data["output"]["found"]
    assert best["key"] == "notes" and 0 < best["score"] <= 1_000_000
    filtered = _search(
        cli, tmp_path, '{ query: "release", mode: hybrid, filters: { team: ops, level: 2 } }'
    )
    assert _keys(filtered.data["output"]["found"]) == ["oncall"]
    unmatched = _search(cli, tmp_path, '{ query: "release", filters: { level: "2" } }')
    assert unmatched.data["output"]["found"] == []  # 2 is not "2"


def test_local_hash_search_is_deterministic_across_processes_and_paths(
    cli: Cli, tmp_path: Path
) -> None:
    _written(cli, tmp_path)
    runs = [_search(cli, tmp_path, '{ query: "release window", mode: hybrid }') for _ in range(2)]
    assert runs[0].data["output"] == runs[1].data["output"]
    by_cli = cli(
        "--output",
        "json",
        "memory",
        "search",
        "support",
        "release window",
        "--mode",
        "hybrid",
        "--db",
        "m.db",
    )
    assert by_cli.rc == 0, by_cli.stderr
    assert by_cli.data["results"] == runs[0].data["output"]["found"]


def test_promote_copies_a_result_into_working_memory(cli: Cli, tmp_path: Path) -> None:
    _written(cli, tmp_path)
    done = _run(cli, tmp_path, PROMOTE.replace("KEY", "recalled"))
    assert done.rc == 0, done.stderr
    run_id = done.data["runId"]
    inspected = cli("--output", "json", "inspect", run_id, "--db", "m.db")
    memory = inspected.data["run"]["workingMemory"]
    assert _keys(memory["recalled"]) == ["notes"]
    effects = {e["taskId"]: e for e in inspected.data["effects"]}
    assert effects["keep"]["operation"] == "builtin.long_term_memory.promote"
    assert effects["keep"]["effectClass"] == "internal_state"
    assert effects["find"]["effectClass"] == "observe"


def test_promote_keys_follow_the_memory_writes_rules(cli: Cli, tmp_path: Path) -> None:
    slotted = PROMOTE.replace("spec:\n", "spec:\n  inputs: { slot: recalled }\n")
    templated = slotted.replace("KEY", '"${{ inputs.slot }}"').replace(
        "memoryWrites: [recalled], ", ""
    )
    (tmp_path / "t.yaml").write_text(templated, encoding="utf-8")
    refused = cli("--output", "json", "check", "t.yaml")
    assert refused.rc == 2
    assert "templated key but no memoryWrites" in refused.error["diagnostics"][0]["message"]
    _written(cli, tmp_path)
    undeclared = slotted.replace("KEY", '"${{ inputs.slot }}"')
    (tmp_path / "u.yaml").write_text(undeclared, encoding="utf-8")
    denied = cli("--output", "json", "run", "u.yaml", "--input", "slot=other", "--db", "m.db")
    assert denied.rc == 4
    assert "not in its memoryWrites" in denied.error["error"]["message"]


def test_cli_put_get_search_and_reindex(cli: Cli, tmp_path: Path) -> None:
    put = cli(
        "--output",
        "json",
        "memory",
        "put",
        "support",
        "style",
        '{"tone": "brief"}',
        "--text",
        "write brief release notes",
        "--metadata",
        '{"team": "docs"}',
        "--retention-days",
        "7",
        "--db",
        "m.db",
    )
    assert put.rc == 0, put.stderr
    assert put.data["value"] == {"tone": "brief"} and put.data["metadata"] == {"team": "docs"}
    assert _days_between(put.data["updatedAt"], put.data["expiresAt"]) == 7
    assert _get(cli, "style").data["text"] == "write brief release notes"
    found = cli(
        "--output",
        "json",
        "memory",
        "search",
        "support",
        "brief notes",
        "--mode",
        "text",
        "--filter",
        'team="docs"',
        "--limit",
        "5",
        "--db",
        "m.db",
    )
    assert found.rc == 0, found.stderr
    assert _keys(found.data["results"]) == ["style"] and found.data["limit"] == 5
    query = ("memory", "search", "support", "brief notes", "--db", "m.db")
    same = cli("--output", "json", *query, "--filter", 'team="docs"', "--filter", 'team="docs"')
    assert same.rc == 0 and _keys(same.data["results"]) == ["style"], same.stderr
    # Two values of one key contradict each other: refused, not the later one kept.
    both = cli("--output", "json", *query, "--filter", 'team="a"', "--filter", 'team="docs"')
    assert both.rc == 2 and "--filter team is given twice" in both.error["error"]["message"]


def test_reindex_serves_a_workflow_with_another_embedding(cli: Cli, tmp_path: Path) -> None:
    put = cli(
        "--output", "json", "memory", "put", "support", "style", '"brief notes"', "--db", "m.db"
    )
    assert put.rc == 0, put.stderr
    # A workflow that embeds with 128 dimensions refuses the 64-dimensional index...
    wide = _search(cli, tmp_path, '{ query: "brief", mode: vector }', dims=128)
    assert wide.rc == 4
    assert "agentctl memory reindex support --dimensions 128" in wide.error["error"]["message"]
    # ...until the namespace is reindexed for it.
    again = cli(
        "--output", "json", "memory", "reindex", "support", "--dimensions", "128", "--db", "m.db"
    )
    assert again.rc == 0 and again.data["reindexed"] == 1
    assert _search(cli, tmp_path, '{ query: "brief", mode: vector }', dims=128).rc == 0


def test_cli_refusals(cli: Cli, tmp_path: Path, backend: str) -> None:
    # Opening a missing database creates it (spec/cli.md: "parents created", "opening
    # migrates"), so only the key is missing; the harness makes each server database up front.
    missing_db = cli("--output", "json", "memory", "get", "support", "x", "--db", "new/none.db")
    assert missing_db.rc == 0 and missing_db.data["value"] is None
    if backend == "sqlite":
        assert (tmp_path / "new" / "none.db").is_file()
    bad_json = cli("--output", "json", "memory", "put", "support", "k", "{oops", "--db", "m.db")
    assert bad_json.rc == 2 and not (tmp_path / "m.db").exists()
    cli("--output", "json", "memory", "put", "support", "k", '"v"', "--db", "m.db")
    bad_mode = cli(
        "--output", "json", "memory", "search", "support", "v", "--mode", "fuzzy", "--db", "m.db"
    )
    assert bad_mode.rc == 2 and "mode" in bad_mode.error["error"]["message"]
    too_many = cli(
        "--output", "json", "memory", "search", "support", "v", "--limit", "101", "--db", "m.db"
    )
    assert too_many.rc == 2
    absent = _get(cli, "absent")
    assert absent.rc == 0 and absent.data["value"] is None and absent.data["createdAt"] is None


def test_replay_reuses_the_recorded_search(cli: Cli, tmp_path: Path) -> None:
    _written(cli, tmp_path)
    first = _search(cli, tmp_path, '{ query: "release", mode: text }')
    assert first.rc == 0, first.stderr
    cli("--output", "json", "memory", "put", "support", "late", '"release train"', "--db", "m.db")
    replayed = cli("--output", "json", "replay", first.data["runId"], "--db", "m.db")
    assert replayed.rc == 0, replayed.stderr
    assert replayed.data["output"] == first.data["output"]
    fresh = _search(cli, tmp_path, '{ query: "release", mode: text }')
    assert "late" in _keys(fresh.data["output"]["found"])
    assert json.dumps(fresh.data["output"]) != json.dumps(first.data["output"])


def test_check_refuses_literal_arguments_the_actions_would_refuse(cli: Cli, tmp_path: Path) -> None:
    bad = SEARCH.replace("WITH", "{ query: x, mode: fuzzy, limit: 500 }").replace("DIMS", "64")
    (tmp_path / "bad.yaml").write_text(bad, encoding="utf-8")
    done = cli("--output", "json", "check", "bad.yaml")
    assert done.rc == 2
    paths = sorted(d["path"] for d in done.error["diagnostics"])
    assert paths == ["spec.tasks.0.with.limit", "spec.tasks.0.with.mode"]
    assert all(d["line"] == 10 for d in done.error["diagnostics"])
    templated = SEARCH.replace("WITH", '{ query: x, mode: "${{ inputs.m }}" }').replace(
        "DIMS", "64"
    )
    (tmp_path / "ok.yaml").write_text(
        templated.replace("spec:\n", "spec:\n  inputs: { m: text }\n")
    )
    assert cli("--output", "json", "check", "ok.yaml").rc == 0
    write = WRITE.replace("retentionDays: 1 }", "retentionDays: 0 }")
    (tmp_path / "w.yaml").write_text(write, encoding="utf-8")
    refused = cli("--output", "json", "check", "w.yaml")
    assert refused.rc == 2
    assert refused.error["diagnostics"][0]["path"] == "spec.tasks.2.with.retentionDays"


ENTRY = (
    HEAD
    + """\
  memory: { longTerm: { namespace: support } }
  actions:
    remember: { kind: builtin.long_term_memory.write }
    recall: { kind: builtin.long_term_memory.read }
    promote: { kind: builtin.long_term_memory.promote }
    look: { kind: builtin.memory.read }
  tasks:
    - { id: w, uses: "action:remember", with: { key: b, entry: { y: 2 }, text: "agents call tools" } }
    - { id: r, uses: "action:recall", needs: [w], with: { key: b } }
    - { id: p, uses: "action:promote", needs: [r], with: { key: got, entry: "${{ tasks.r.output.value }}" } }
    - { id: m, uses: "action:look", needs: [p], with: { key: got } }
"""
)


def test_entry_is_the_payload_of_a_write_and_of_a_promotion(cli: Cli, tmp_path: Path) -> None:
    # spec/dsl.md §3: a write takes `value` (later `entry`/`content`); a promotion `entry`.
    (tmp_path / "wf.yaml").write_text(ENTRY, encoding="utf-8")
    ran = cli("--output", "json", "run", "wf.yaml", "--db", "r.db")
    assert ran.rc == 0, ran.stderr
    assert ran.data["output"]["r"]["value"] == {"y": 2}
    assert ran.data["output"]["m"]["value"] == {"y": 2}
    both = ENTRY.replace("entry: { y: 2 },", "entry: { y: 2 }, value: 1,")
    (tmp_path / "both.yaml").write_text(both, encoding="utf-8")
    refused = cli("--output", "json", "check", "both.yaml")
    assert refused.rc == 2, refused.stdout
    [problem] = refused.error["diagnostics"]
    assert problem["path"] == "spec.tasks.0.with.entry"


def test_a_value_starting_with_a_dash_is_refused_with_how_to_pass_it(
    cli: Cli, tmp_path: Path
) -> None:
    # A negative JSON number reads as an unknown option (as in the original, whose parser
    # tips `-- VALUE`): the refusal says how to pass it, changes nothing, and the tip works.
    for value in ("-5", "-1.5"):
        done = cli("--output", "json", "memory", "put", "support", "k", value, "--db", "m.db")
        message = done.error["error"]["message"]
        assert done.rc == 2 and f"to pass '{value}' as a value, use '-- {value}'" in message
    assert not (tmp_path / "m.db").exists()
    human = cli("memory", "search", "support", "-Infinity", "--db", "m.db")
    assert human.rc == 2 and "use '-- -Infinity'" in human.stderr
    # A misspelt option is a typo, not a value: no tip, click's suggestion instead.
    typo = cli("memory", "put", "support", "k", "1", "--retention-day", "2", "--db", "m.db")
    assert typo.rc == 2 and "--retention-days" in typo.stderr and "as a value" not in typo.stderr
    put = cli("--output", "json", "memory", "put", "support", "k", "--db", "m.db", "--", "-1.5")
    assert put.rc == 0 and put.data["value"] == -1.5, put.stderr
    assert _get(cli, "k").data["value"] == -1.5
