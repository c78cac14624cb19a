"""An input a sub-workflow invocation passes that nothing takes (spec/dsl.md §4.9).

A boundary's output is the definition's ``inputs`` defaults ⊕ the invocation's ``with``, so
any key is accepted, as in the original. But a ``with`` key the definition neither declares
(``inputs``, ``inputSchema.properties``) nor reads (``inputs.NAME`` in its tasks or
``outputs``) reaches nothing: most often a misspelt input, whose default is then used in
silence (``with: {wrd: hi}`` for ``word``). Each such key is reported as a ``warning`` at the
key (``unused_invocation_input_warnings``); the compile, the digests and the exit code are
unchanged.

Invariants: pure; judged once per authored invocation (the workflow's tasks and each
sub-workflow's), never per expanded child; an invocation of an unknown sub-workflow is the
compiler's error, not reported here.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from agentctl.core.compiler.diagnostics import Collector, Locator
from agentctl.core.compiler.subworkflows import input_reads
from agentctl.core.compiler.variables import authored_tasks
from agentctl.errors import Diagnostic


def _taken(name: str, definition: Mapping[str, Any]) -> set[str]:
    """The input names a definition declares or reads."""
    schema = definition.get("inputSchema")
    properties = schema.get("properties") if isinstance(schema, dict) else None
    return {
        *(definition.get("inputs") or {}),
        *(properties if isinstance(properties, dict) else {}),
        *(read for _where, read in input_reads(definition, f"spec.subworkflows.{name}")),
    }


def unused_invocation_input_warnings(
    doc: Mapping[str, Any], *, file: str | None = None, locate: Locator | None = None
) -> list[Diagnostic]:
    """A ``warning`` at each invocation ``with`` key its sub-workflow neither declares nor
    reads (module docstring)."""
    spec = doc.get("spec") or {}
    definitions = spec.get("subworkflows") or {}
    diags = Collector(file, locate)  # (it locates each path; its findings become warnings)
    taken_by: dict[str, set[str]] = {}  # per definition, however often it is invoked
    for prefix, index, task in authored_tasks(spec):
        uses = str(task.get("uses", "")) if isinstance(task, dict) else ""
        name = uses.removeprefix("workflow:")
        definition = definitions.get(name) if uses.startswith("workflow:") else None
        given = task.get("with") if isinstance(definition, dict) else None
        if not isinstance(given, dict) or not isinstance(definition, dict):
            continue
        if name not in taken_by:
            taken_by[name] = _taken(name, definition)
        taken = taken_by[name]
        for key in given:
            if key not in taken:
                close = difflib.get_close_matches(key, sorted(taken), n=1)
                diags.add(
                    "schema_violation",
                    f"sub-workflow `{name}` (invoked as `{task.get('id')}`) neither declares "
                    f"nor reads input `{key}`: the value reaches nothing",
                    f"{prefix}.{index}.with.{key}",
                    help=f"did you mean `{close[0]}`?"
                    if close
                    else f"declare `{key}` under spec.subworkflows.{name}.inputs, or remove it",
                )
    return [replace(d, severity="warning") for d in diags.items]
