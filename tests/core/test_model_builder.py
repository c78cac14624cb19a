"""``build_model_call``: the fake provider's recorded input is frozen; a real provider's carries
what its adapter needs, with every secret left as a reference named in ``secret_refs``."""

from __future__ import annotations

import json

import pytest

from agentctl.core.builders import build_model_call
from agentctl.core.canonical import canonical_json
from agentctl.core.effects import input_digest
from agentctl.core.operations import BuildInput, RunContext, has_pointer, pointer, replace_at
from agentctl.errors import RunFailedError

MESSAGES = [{"role": "system", "content": "s"}, {"role": "user", "content": "hi"}]
AGENT = {
    "provider": "p",
    "model": "m",
    "tools": ["read"],
    "maxOutputTokens": 64,
    "timeoutSeconds": 30,
    "providerOptions": {"finalText": "x"},
    "structuredOutput": None,
    "reasoning": None,
    "stream": False,
}
READ = {"kind": "builtin.workspace.read", "description": "Read", "inputSchema": {"type": "object"}}
POLICY = {
    "networkAllowlist": ["api.example.com"],
    "network": {"allowPrivate": False, "customCa": {"env": "CA_PEM"}, "maxResponseBytes": 1000},
}


def _build(provider: dict[str, object], tools: bool = True):  # type: ignore[no-untyped-def]
    config = {"agent": AGENT, "provider": provider, **({"tools": {"read": READ}} if tools else {})}
    return build_model_call(BuildInput("t", "p", config, MESSAGES, RunContext("/ws", POLICY)))


def test_fake_recorded_input_is_unchanged() -> None:
    built = _build({"kind": "fake"})
    expected = {
        "provider": "p",
        "model": "m",
        "messages": MESSAGES,
        "tools": ["read"],
        "maxOutputTokens": 64,
        "options": {"finalText": "x"},
    }
    assert canonical_json(built.recorded) == canonical_json(expected)
    assert json.dumps(built.recorded) == json.dumps(expected)  # same keys, same order
    assert built.request == built.recorded and not built.secret_refs and not built.secret_env
    assert input_digest(built.recorded) == input_digest(expected)


def test_real_provider_call_keeps_secrets_as_references() -> None:
    provider = {
        "kind": "openai",
        "endpoint": "https://api.example.com/v1/responses",
        "credential": {"env": "OPENAI_API_KEY"},
        "apiVersion": None,
        "headers": {"X-B": {"env": "B"}, "X/A~": {"file": "a.txt"}},
    }
    built = _build(provider)
    assert built.recorded["credential"] == {"env": "OPENAI_API_KEY"}
    assert built.recorded["tools"] == [
        {"name": "read", "description": "Read", "inputSchema": {"type": "object"}}
    ]
    assert "egress" not in built.recorded and "timeoutSeconds" not in built.recorded
    assert built.request["egress"] == {
        "networkAllowlist": ["api.example.com"],
        "allowPrivate": False,
        "customCa": {"env": "CA_PEM"},
        "maxResponseBytes": 1000,
    }
    assert built.request["timeoutSeconds"] == 30.0
    assert dict(built.secret_refs) == {
        "/credential": {"env": "OPENAI_API_KEY"},
        "/headers/X~1A~0": {"file": "a.txt"},
        "/headers/X-B": {"env": "B"},
        "/egress/customCa": {"env": "CA_PEM"},
    }
    for where in built.secret_refs:
        assert has_pointer(built.request, where)
    assert not has_pointer(built.recorded, "/egress/customCa")


def test_filling_the_references_leaves_the_recorded_input_alone() -> None:
    built = _build(
        {"kind": "anthropic", "endpoint": "https://x/v1/messages", "credential": {"env": "K"}}
    )
    filled = replace_at(built.request, pointer("credential"), "sk-value")
    assert filled["credential"] == "sk-value" and built.request["credential"] == {"env": "K"}
    assert "sk-value" not in json.dumps(built.recorded)


def test_missing_tool_definitions_fail_the_call() -> None:
    with pytest.raises(RunFailedError, match="definition of tool 'read'"):
        _build(
            {"kind": "google", "endpoint": "https://x/v1beta/models", "credential": {"env": "K"}},
            tools=False,
        )


def test_json_pointers_escape_and_replace() -> None:
    assert pointer("headers", "a/b~c") == "/headers/a~1b~0c"
    doc = {"headers": {"a/b~c": 1}, "other": {"x": 1}}
    changed = replace_at(doc, "/headers/a~1b~0c", 2)
    assert changed == {"headers": {"a/b~c": 2}, "other": {"x": 1}}
    assert doc["headers"] == {"a/b~c": 1} and changed["other"] is doc["other"]
    with pytest.raises(KeyError):
        replace_at(doc, "/missing/x", 1)


def test_a_call_cut_by_its_tasks_deadline_carries_the_shorter_timeout() -> None:
    # The agent loop passes what is left of the task's timeoutSeconds when it is less than the
    # agent's own 30 s: the provider's HTTP timeout is that, never more than the agent's.
    provider: dict[str, object] = {"kind": "openai", "credential": {"env": "OPENAI_API_KEY"}}
    provider["endpoint"] = "https://api.example.com/v1/responses"
    config = {"agent": AGENT, "provider": provider, "tools": {"read": READ}}
    for given, expected in ((2.5, 2.5), (120.0, 30.0)):
        run = RunContext("/ws", POLICY)
        built = build_model_call(BuildInput("t", "p", config, MESSAGES, run, timeout_seconds=given))
        assert built.request["timeoutSeconds"] == expected
