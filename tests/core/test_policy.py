"""Pure policy decisions, path confinement and allowlists (spec/dsl.md §7, spec/cli.md §9)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentctl.core.policy import (
    Decision,
    DecisionKind,
    ReconcileAuthorization,
    ReconcileSubject,
    authorize_reconciliation,
    check_environment,
    check_process,
    check_readable,
    check_relative_path,
    check_writable,
    decide,
    filter_environment,
    host_allowed,
    is_within,
    join,
    process_allowed,
    writable,
)
from agentctl.errors import PolicyDeniedError, ValidationError


def write(policy: dict[str, Any], **kw: Any) -> Decision:
    args: dict[str, Any] = {
        "name": "filesystem.write",
        "effect_class": "workspace_mutate",
        "risk": "medium",
    }
    args.update(kw)
    return decide(policy, **args)


def test_default_policy_pauses_mutations_and_allows_observation() -> None:
    paused = write({})
    assert paused.kind is DecisionKind.REQUIRE_APPROVAL and paused.needs_approval
    assert "pauses durably" in paused.reason
    read = decide({}, name="filesystem.read", effect_class="observe", risk="low")
    assert read.allowed and not read.denied


@pytest.mark.parametrize(
    ("mode", "effect_class", "risk", "needs"),
    [
        ("never", "process_execution", "critical", False),
        ("always", "observe", "low", True),
        ("always", "model", "medium", True),
        ("high_risk", "process_execution", "high", True),
        ("high_risk", "remote_agent", "critical", True),
        ("high_risk", "workspace_mutate", "medium", False),
        ("mutations", "workspace_mutate", "low", True),
        ("mutations", "external_mutate", "low", True),
        ("mutations", "process_execution", "low", True),
        ("mutations", "remote_agent", "low", True),
        ("mutations", "internal_state", "low", False),
        ("mutations", "network", "high", False),
        ("mutations", "model", "medium", False),
    ],
)
def test_approval_modes(mode: str, effect_class: str, risk: str, needs: bool) -> None:
    decision = decide({"approval": mode}, name="x", effect_class=effect_class, risk=risk)
    assert decision.needs_approval is needs
    assert decision.allowed is (not needs)


def test_tools_deny_and_allow_apply_to_non_model_effects() -> None:
    assert write({"approval": "never", "toolsDeny": ["filesystem.write"]}).denied
    denied = write({"approval": "never", "toolsAllow": ["peek"]})
    assert denied.denied and "toolsAllow" in denied.reason
    assert write({"approval": "never", "toolsAllow": ["filesystem.write"]}).allowed
    # deny wins even when the name is also allowed
    assert write(
        {"approval": "never", "toolsAllow": ["filesystem.write"], "toolsDeny": ["filesystem.write"]}
    ).denied


def test_model_effects_are_judged_by_provider_not_tool_lists() -> None:
    policy = {"approval": "never", "toolsAllow": ["peek"], "providers": ["sim"]}
    common: dict[str, Any] = {
        "name": "model",
        "effect_class": "model",
        "risk": "medium",
        "is_model": True,
    }
    assert decide(policy, provider="sim", **common).allowed
    denied = decide(policy, provider="openai", **common)
    assert denied.denied and "providers" in denied.reason
    assert decide({"approval": "never"}, provider="anything", **common).allowed


def test_non_interactive_modes() -> None:
    assert write({"nonInteractive": "pause"}).needs_approval
    for mode in ("deny_approval", "fail"):
        decision = write({"nonInteractive": mode})
        assert decision.denied and mode in decision.reason
    # interactive runs ask instead of applying the non-interactive mode
    assert write({"nonInteractive": "fail"}, interactive=True).needs_approval


def test_tool_approval_always_adds_and_never_cannot_waive() -> None:
    observe: dict[str, Any] = {"name": "peek", "effect_class": "observe", "risk": "low"}
    assert decide({"approval": "never"}, tool_approval="always", **observe).needs_approval
    forced = decide(
        {"approval": "never", "nonInteractive": "fail"}, tool_approval="always", **observe
    )
    assert forced.denied and "tool contract" in forced.reason
    assert write({"approval": "mutations"}, tool_approval="never").needs_approval
    assert decide({"approval": "never"}, tool_approval="never", **observe).allowed


WRITE: dict[str, Any] = {
    "operation": "builtin.write",  # judged by its kind's policy name, filesystem.write
    "effect_class": "workspace_mutate",
    "risk": "medium",
    "request": {"path": "out.txt"},
}
MODEL: dict[str, Any] = {
    "operation": "fake",  # judged by the provider its request names
    "effect_class": "model",
    "risk": "medium",
    "request": {"provider": "main"},
}


def reconcile(policy: dict[str, Any], effect: dict[str, Any], approved: bool) -> Any:
    subject = ReconcileSubject(**effect)
    return authorize_reconciliation(policy, subject, actor="ops", approved=approved)


@pytest.mark.parametrize("mode", ["pause", "deny_approval", "fail"])
def test_reconciling_a_mutation_needs_approved_whatever_the_non_interactive_mode(
    mode: str,
) -> None:
    policy = {"approval": "mutations", "nonInteractive": mode}
    with pytest.raises(PolicyDeniedError, match="add --approved"):
        reconcile(policy, WRITE, approved=False)
    given: ReconcileAuthorization = reconcile(policy, WRITE, approved=True)
    assert given.kind == "explicit_operator_approval" and given.actor == "ops"
    assert given.to_json()["capability"] == "effect_reconciliation"
    assert "mutations" in given.reason


def test_reconciling_what_policy_allows_records_the_allow() -> None:
    allowed = reconcile({"approval": "never"}, WRITE, approved=False)
    assert (allowed.kind, allowed.approved) == ("policy_allow", False)
    # --approved where none is needed is recorded as given, not as required
    extra = reconcile({"approval": "never"}, WRITE, approved=True)
    assert (extra.kind, extra.to_json()["explicitApproval"]) == ("policy_allow", True)
    assert reconcile({"approval": "mutations"}, MODEL, approved=False).kind == "policy_allow"


@pytest.mark.parametrize(
    ("policy", "effect"),
    [
        ({"approval": "never", "toolsDeny": ["filesystem.write"]}, WRITE),
        ({"approval": "never", "toolsAllow": ["filesystem.read"]}, WRITE),
        ({"approval": "never", "providers": ["other"]}, MODEL),
    ],
)
def test_approved_never_overrides_a_reconciliation_denial(
    policy: dict[str, Any], effect: dict[str, Any]
) -> None:
    for approved in (False, True):
        with pytest.raises(PolicyDeniedError, match="cannot override a denial"):
            reconcile(policy, effect, approved=approved)
    # the same lists let the names the run used through
    allowing = {"approval": "never", "toolsAllow": ["filesystem.write"], "providers": ["main"]}
    assert reconcile(allowing, effect, approved=False).kind == "policy_allow"


def test_an_agent_tool_call_is_judged_by_the_tool_name_the_run_used() -> None:
    read = {"operation": "builtin.workspace.read", "effect_class": "observe", "risk": "low"}
    policy = {"approval": "never", "toolsAllow": ["read_fixture"]}
    assert (
        reconcile(policy, {**read, "request": {}, "tool": "read_fixture"}, False).kind
        == "policy_allow"
    )
    with pytest.raises(PolicyDeniedError, match="toolsAllow"):
        reconcile(policy, {**read, "request": {}}, approved=False)


def test_a_tool_declaring_approval_always_needs_approved_to_reconcile() -> None:
    # The run held the call for approval though its policy says never: reconciling it asks
    # for the same approval (the tool's `approval: always` adds a requirement).
    read = {"operation": "builtin.workspace.read", "effect_class": "observe", "risk": "low"}
    call = {**read, "request": {}, "tool": "read_fixture", "tool_approval": "always"}
    with pytest.raises(PolicyDeniedError, match="add --approved"):
        reconcile({"approval": "never"}, call, approved=False)
    given = reconcile({"approval": "never"}, call, approved=True)
    assert given.kind == "explicit_operator_approval" and "tool contract" in given.reason


def test_an_internal_operation_is_not_judged_by_the_name_lists() -> None:
    # An agent's MCP tools/list: the run judged it by no name, so neither list refuses it;
    # approval by class and risk still applies.
    listing = {"operation": "mcp.list_tools", "effect_class": "observe", "risk": "low"}
    lists = {"toolsAllow": ["count_words"], "toolsDeny": ["mcp.list_tools"]}
    allowed = reconcile({"approval": "never", **lists}, {**listing, "request": {}}, False)
    assert allowed.kind == "policy_allow"
    with pytest.raises(PolicyDeniedError, match="add --approved"):
        reconcile({"approval": "always", **lists}, {**listing, "request": {}}, approved=False)
    # an action is still judged by its policy name
    with pytest.raises(PolicyDeniedError, match="toolsAllow"):
        reconcile({"approval": "never", **lists}, WRITE, approved=False)


def test_unknown_modes_are_validation_errors() -> None:
    with pytest.raises(ValidationError):
        write({"approval": "sometimes"})
    with pytest.raises(ValidationError):
        write({"nonInteractive": "ask"})


@pytest.mark.parametrize("key", ["toolsDeny", "toolsAllow"])
@pytest.mark.parametrize("value", ["filesystem.write,shell.exec", 7, {"filesystem.write": True}])
def test_a_name_list_that_is_not_an_array_is_refused(key: str, value: object) -> None:
    # Text was tested by substring (a toolsDeny of "filesystem.write,shell.exec" denied, one
    # of "filesystem" did not), a number raised TypeError: both are now the policy's error.
    with pytest.raises(ValidationError, match=rf"policy\.{key} must be an array"):
        write({"approval": "never", key: value})


def test_a_providers_list_that_is_not_an_array_is_refused() -> None:
    with pytest.raises(ValidationError, match=r"policy\.providers must be an array"):
        decide(
            {"approval": "never", "providers": "sim"},
            name="model",
            effect_class="model",
            risk="medium",
            is_model=True,
            provider="sim",
        )


# --- paths --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "normalized"),
    [
        ("a.txt", "a.txt"),
        ("out/a.txt", "out/a.txt"),
        ("./out//a.txt", "out/a.txt"),
        (".", "."),
        ("a/./b/", "a/b"),
    ],
)
def test_relative_paths_are_normalised(text: str, normalized: str) -> None:
    assert check_relative_path(text) == normalized


@pytest.mark.parametrize(
    "text", ["", "  ", "/etc/passwd", "..", "../x", "out/../../x", "a/..", "a\0b"]
)
def test_bad_relative_paths_are_denied(text: str) -> None:
    with pytest.raises(PolicyDeniedError):
        check_relative_path(text)


def test_join() -> None:
    assert join("/ws", "out/a.txt") == "/ws/out/a.txt"
    assert join("/ws/", "./a") == "/ws/a"
    with pytest.raises(PolicyDeniedError):
        join("/ws", "../x")


@pytest.mark.parametrize(
    ("root", "path", "inside"),
    [
        ("/ws", "/ws", True),
        ("/ws", "/ws/a/b", True),
        ("/ws/", "/ws/a", True),
        ("/ws", "/wsx/a", False),  # a shared prefix is not containment
        ("/ws/out", "/ws/outside", False),
        ("/ws", "/", False),
        ("/", "/anything", True),
        ("/ws", "/ws/../etc", False),  # not canonical
        ("/ws", "ws/a", False),  # relative
        ("/ws", "/ws/a\0", False),
    ],
)
def test_is_within(root: str, path: str, inside: bool) -> None:
    assert is_within(root, path) is inside


def test_writable_roots() -> None:
    assert writable("/ws/out/a.txt", "/ws", ["out"])
    assert writable("/ws/out/deep/new.txt", "/ws", ["./out"])
    assert writable("/tmp/x/y", "/ws", ["/tmp/x"])
    assert not writable("/ws/a.txt", "/ws", ["out"])
    assert not writable("/ws/outer/a.txt", "/ws", ["out"])
    assert not writable("/ws/out/a.txt", "/ws", [])  # no writable roots: every write denied
    with pytest.raises(PolicyDeniedError, match="no writableRoots"):
        check_writable("/ws/out/a.txt", "/ws", [])
    with pytest.raises(PolicyDeniedError, match="outside every writable root"):
        check_writable("/ws/a.txt", "/ws", ["out"])
    check_writable("/ws/out/a.txt", "/ws", ["out"])


def test_readable() -> None:
    check_readable("/ws/notes.txt", "/ws")
    with pytest.raises(PolicyDeniedError):
        check_readable("/etc/passwd", "/ws")


@given(st.lists(st.sampled_from(["a", "b", "..", ".", ""]), max_size=6))
def test_checked_relative_paths_stay_inside_the_workspace(parts: list[str]) -> None:
    text = "/".join(parts)
    try:
        normalized = check_relative_path(text)
    except PolicyDeniedError:
        return
    assert ".." not in normalized.split("/")
    assert is_within("/ws", join("/ws", normalized))


# --- allowlists ---------------------------------------------------------------------------


def test_process_allowlist_is_by_basename() -> None:
    assert process_allowed("/bin/echo", ["echo"])
    assert process_allowed("echo", ["echo"])
    assert not process_allowed("/bin/echo2", ["echo"])
    assert not process_allowed("/bin/echo", [])
    assert not process_allowed("", [""])
    check_process("/usr/bin/git", ["git"])
    with pytest.raises(PolicyDeniedError, match="processAllowlist"):
        check_process("/bin/sh", ["git"])


def test_environment_allowlist() -> None:
    env = {"PATH": "/bin", "SAFE": "1", "HOME": "/root"}
    assert filter_environment(env, ["SAFE", "MISSING"]) == {"SAFE": "1"}
    assert filter_environment(env, []) == {}
    check_environment("SAFE", ["SAFE"])
    with pytest.raises(PolicyDeniedError, match="environmentAllowlist"):
        check_environment("HOME", ["SAFE"])


@pytest.mark.parametrize(
    ("host", "allowed"),
    [
        ("api.example.com", True),
        ("API.Example.com", True),
        ("x.tools.example", True),
        ("a.b.tools.example", True),
        ("tools.example", False),  # the apex is excluded by `*.`
        ("eviltools.example", False),
        ("example.com", False),
        ("api.example.com.evil", False),
    ],
)
def test_host_allowlist(host: str, allowed: bool) -> None:
    assert host_allowed(host, ["api.example.com", "*.tools.example"]) is allowed
