"""The workflow of a fake agent whose one tool call writes ``out/t.txt`` (``builtin.workspace.
write``): the artifact tests drive its file through a live run and through a crash."""

from __future__ import annotations

HEAD = """\
apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: {{ name: {name} }}
spec:
  policy: {{ approval: never, writableRoots: [out] }}
  providers: {{ sim: {{ kind: fake }} }}
  tools:
    wr:
      kind: builtin.workspace.write
      capability: filesystem.write
      effectClass: workspace_mutate
      idempotency: idempotent
      risk: medium
      inputSchema:
        type: object
        additionalProperties: false
        required: [path, content]
        properties: {{ path: {{ type: string }}, content: {{ type: string }} }}
  agents:
    w:
      provider: sim
      model: m
      instructions: hi
      tools: [wr]
      providerOptions: {{ toolInput: {{ path: out/t.txt, content: tooled }} }}
"""


def tool_writer(name: str, rest: str) -> str:
    """The workflow ``name``: the agent above, then ``rest`` (its ``actions``/``tasks``)."""
    return HEAD.format(name=name) + rest
