"""What the egress pre-flight judges: the plan's reachable endpoints (from the registry's
``reach`` of each task's kind) and the whole-answer address rule shared with the worker."""

from __future__ import annotations

import pytest

from agentctl.core.compiler import compile_workflow
from agentctl.core.dsl import load_workflow
from agentctl.core.egress_reach import plan_endpoints
from agentctl.core.egress_rules import EgressPolicy, checked_addresses
from agentctl.core.operations import Endpoint
from agentctl.errors import DnsError, NetworkPolicyError

WORKFLOW = """\
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: { name: reach }
spec:
  inputs: { peer: left }
  providers:
    public: { kind: anthropic }
    local: { kind: openai, endpoint: "http://models.test:8080/v1/responses" }
    unused: { kind: google }
    sim: { kind: fake }
  mcpServers:
    notes: { url: "https://notes.test/mcp" }
    files: { url: "https://files.test/mcp" }
    idle: { url: "https://idle.test/mcp" }
  a2aPeers:
    left: { cardUrl: "https://left.test/.well-known/agent-card.json" }
    right: { cardUrl: "https://right.test/.well-known/agent-card.json" }
  tools:
    count: { kind: mcp.tool, server: files, tool: word_count }
  agents:
    writer: { provider: public, model: m, instructions: write, tools: [count] }
    reader: { provider: local, model: m, instructions: read }
    fake: { provider: sim, model: m, instructions: nothing }
  actions:
    call: { kind: mcp.call }
    delegate: { kind: a2a.delegate }
  tasks:
    - { id: w, uses: "agent:writer", with: { prompt: hi } }
    - { id: r, uses: "agent:reader", with: { prompt: hi } }
    - { id: f, uses: "agent:fake", with: { prompt: hi } }
    - { id: c, uses: "action:call", with: { server: notes, tool: t, arguments: {} } }
    - { id: d, uses: "action:delegate", with: { peer: "${{ inputs.peer }}", message: hi } }
"""


def test_the_closure_of_providers_servers_and_peers_is_reached() -> None:
    plan = compile_workflow(load_workflow(WORKFLOW).document)
    assert plan_endpoints(plan) == (
        # a templated peer name may render to any declared peer
        Endpoint("A2A peer left", "https://left.test/.well-known/agent-card.json"),
        Endpoint("A2A peer right", "https://right.test/.well-known/agent-card.json"),
        Endpoint("MCP server files", "https://files.test/mcp"),
        Endpoint("MCP server notes", "https://notes.test/mcp"),
        Endpoint("provider local", "http://models.test:8080/v1/responses"),
        # no endpoint written: the kind's default public one
        Endpoint("provider public", "https://api.anthropic.com/v1/messages"),
    )


def test_one_forbidden_address_refuses_the_whole_answer() -> None:
    strict = EgressPolicy()
    answer = ["93.184.216.34", "::ffff:10.0.0.1", "93.184.216.34"]
    with pytest.raises(NetworkPolicyError, match=r"::ffff:a00:1 \(private\)"):
        checked_addresses("mixed.test", answer, strict)
    relaxed = EgressPolicy(allow_private=True)
    assert checked_addresses("mixed.test", answer, relaxed) == ("93.184.216.34", "::ffff:a00:1")
    with pytest.raises(DnsError):
        checked_addresses("empty.test", [], relaxed)
