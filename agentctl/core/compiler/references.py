"""Reference resolution: task kinds, unique ids, needs, template reads, agent/tool names.

Invariants: every node leaves ``resolve_nodes`` with a ``kind`` or is dropped with a
diagnostic; the returned mapping holds the first node of each id in expanded declaration
order; a ``tasks.X.output`` read in ``with``/``vars`` must name a task of the plan that is in
the reader's own ``needs`` (``when`` is exempt, as in the original).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from agentctl.core.compiler.diagnostics import Collector
from agentctl.core.compiler.ir import Env, Node
from agentctl.core.compiler.templating import (
    OPEN,
    condition_problem,
    condition_tasks,
    iter_strings,
    task_references,
    template_problem,
    templated_strings_at,
)
from agentctl.core.templates import TemplateError, find_references


def resolve_nodes(nodes: list[Node], env: Env, diags: Collector) -> dict[str, Node]:
    """Nodes by id with their kind set; duplicates and unresolvable uses reported and dropped."""
    resolved: dict[str, Node] = {}
    for node in nodes:
        if node.id in resolved:
            diags.add(
                "duplicate_task",
                f"task id `{node.id}` is used more than once after expansion",
                f"{node.path}.id",
                help="task ids must be unique, including expanded and sub-workflow ids",
            )
            continue
        if node.kind is None:
            node.kind = _kind_of(node, env, diags)
        if node.kind is not None:
            resolved[node.id] = node
        else:
            diags.dropped.add(node.id)
    return resolved


def _kind_of(node: Node, env: Env, diags: Collector) -> str | None:
    uses = str(node.task.get("uses", ""))
    name = uses.partition(":")[2]
    has_route = node.task.get("route") is not None
    if uses == "router" or has_route:
        if uses != "router" or not has_route:
            diags.add(
                "schema_violation",
                f"task `{node.task['id']}`: `route` and `uses: router` go together",
                f"{node.path}.route" if has_route else f"{node.path}.uses",
            )
            return None
        return "router"
    if uses.startswith("action:") and name in env.actions:
        return "action"
    if uses.startswith("agent:") and name in env.agents:
        return "agent"
    diags.add(
        "missing_reference",
        f"task `{node.task['id']}` uses unknown `{uses}`",
        f"{node.path}.uses",
        help="uses must name a spec.actions, spec.agents or spec.subworkflows entry, or router",
    )
    return None


def check_needs(graph: dict[str, Node], diags: Collector) -> None:
    for node in graph.values():
        for need in node.needs:
            # A sub-workflow's task naming a task outside it was reported by its scope.
            if need not in node.source.foreign and diags.unknown(need, graph):
                declared = node.task.get("needs") or []
                # At the entry as written when it is there (a sub-workflow's are rewritten).
                at = f".{declared.index(need)}" if need in declared else ""
                diags.add(
                    "missing_reference",
                    f"task `{node.task['id']}` needs unknown task `{need}`",
                    f"{node.path}.needs{at}",
                    help=_needs_help(need, graph),
                )


def _needs_help(need: str, graph: dict[str, Node]) -> str:
    import difflib  # here, not at the top: only a document with an unknown need needs it

    # Suggest the ids a user writes: an expanded child (``fan--0000-…``) is named by its parent.
    written = [task_id for task_id in graph if "--" not in task_id]
    close = difflib.get_close_matches(need, written, n=1)
    hint = f"did you mean `{close[0]}`? " if close else ""
    return f"{hint}name a task of the same `tasks` list (an expanded task by its parent id)"


def check_reads(
    node: Node,
    value: Any,
    where: str,
    graph: dict[str, Node],
    diags: Collector,
    at: str | None = None,
) -> None:
    """Template syntax of every string in ``value`` and its task reads against ``needs``,
    each reported at its own key below ``at`` (default: the task's ``where``). Variables are
    checked at the layer that writes them (``varreads``), not here."""
    if not value:  # (many a with: nothing to walk)
        return
    for path, text in templated_strings_at(value, at or f"{node.path}.{where}"):
        _check_text(node, text, (path, ""), graph, diags)


def check_default_reads(
    node: Node, name: str, action: dict[str, Any], graph: dict[str, Node], diags: Collector
) -> None:
    """``check_reads`` of the ``with`` defaults of action ``name`` that the task's own ``with``
    does not replace, each reported at the action's key (the task named in the message)."""
    defaults = action.get("with")
    own = node.task.get("with")
    if not isinstance(defaults, dict):
        return
    for key, value in defaults.items():
        if not isinstance(own, dict) or key not in own:
            where = f"spec.actions.{name}.with.{key}"
            context = f" (in action `{name}`'s with defaults)"
            _check_texts(node, value, where, context, graph, diags)


def _check_texts(
    node: Node, value: Any, where: str, context: str, graph: dict[str, Node], diags: Collector
) -> None:
    for text in iter_strings(value):
        if OPEN in text or "}}" in text:
            _check_text(node, text, (where, context), graph, diags)


def _check_text(
    node: Node, text: str, at: tuple[str, str], graph: dict[str, Node], diags: Collector
) -> None:
    """One templated string's syntax and task reads (``at``: as ``_check_read``'s)."""
    problem = template_problem(text)
    if problem is not None:
        diags.add("invalid_template", problem, at[0])
        return
    for task_id in task_references(text):
        _check_read(node, task_id, at, graph, diags)


def _check_read(
    node: Node, task_id: str, at: tuple[str, str], graph: dict[str, Node], diags: Collector
) -> None:
    """``at``: the dotted path reported and the text placing the read for the message."""
    where, context = at
    reader = node.task["id"]
    if task_id in node.source.foreign:
        return  # reported where the sub-workflow names it: "add it to needs" would mislead
    if diags.unknown(task_id, graph):
        diags.add(
            "missing_reference", f"task `{reader}` reads unknown task `{task_id}`{context}", where
        )
    elif task_id not in node.needs:
        diags.add(
            "invalid_template",
            f"task `{reader}` reads tasks.{task_id}.output{context} without needing `{task_id}`",
            where,
            help=needs_help(reader, task_id, context),
        )


def needs_help(reader: str, task_id: str, context: str) -> str:
    """What fixes task ``reader``'s read of a task it does not need (``context``: where the
    read is, "" when it is in the task's own ``with`` or ``vars``)."""
    if task_id == reader:  # "add it to needs" would make a cycle of one
        return f"a task cannot need itself: read tasks.{task_id}.output in the tasks that need it"
    return f"add {task_id} to the needs of {reader}" if context else f"add {task_id} to needs"


def check_when(node: Node, graph: dict[str, Node], diags: Collector) -> None:
    """Conditions must parse and name existing tasks (the needs rule does not apply)."""
    when = node.when
    if not isinstance(when, str):
        return
    # A loop child's condition is its loop's guard: point at the `while` the user wrote.
    where = "loop.while" if node.expansion == "loop" else "when"
    problem = condition_problem(when)
    if problem is not None:
        diags.add("invalid_template", problem, f"{node.path}.{where}")
        return
    _unknown_reads(node, condition_tasks(when), "condition", where, graph, diags)


def _unknown_reads(
    node: Node, task_ids: Any, what: str, where: str, graph: dict[str, Node], diags: Collector
) -> None:
    """``missing_reference`` for every task a condition or template reads that does not exist."""
    for task_id in task_ids:
        if diags.unknown(task_id, graph):
            diags.add(
                "missing_reference",
                f"task `{node.task['id']}` {what} reads unknown task `{task_id}`",
                f"{node.path}.{where}",
            )


def check_templates(
    node: Node, value: Any, where: str, graph: dict[str, Node], diags: Collector
) -> None:
    """Template syntax and task existence, without the needs rule (conditions, compensation)."""
    for text in iter_strings(value):
        if OPEN not in text:
            continue
        problem = template_problem(text)
        if problem is not None:
            diags.add("invalid_template", problem, f"{node.path}.{where}")
            continue
        _unknown_reads(node, task_references(text), f"{where} template", where, graph, diags)


def _output_texts(outputs: Any) -> Iterator[tuple[str, str]]:
    """Each template text of ``spec.outputs`` with its own path (``spec.outputs.x.y.0`` for a
    text nested in an output's value), so a diagnostic points at the text itself."""
    if isinstance(outputs, dict):
        for key, value in outputs.items():
            yield from templated_strings_at(value, f"spec.outputs.{key}")


def check_run_outputs(
    outputs: Any, graph: dict[str, Node], run_vars: Mapping[str, Any], diags: Collector
) -> bool:
    """``spec.outputs``: template syntax; every task read names a task of the plan (no needs
    rule: the outputs render once every task is done); every ``vars`` read names a variable
    of the run as a whole (``variables.run_vars``: an agent's or a task's variables are its
    own, so the outputs cannot see them). Whether they read any variable (the plan then
    carries the run's)."""
    reads = False
    for where, text in _output_texts(outputs):
        reads |= _check_output_text(text, where, graph, run_vars, diags)
    return reads


def _check_output_text(
    text: str, where: str, graph: dict[str, Node], run_vars: Mapping[str, Any], diags: Collector
) -> bool:
    try:
        references = find_references(text)
    except TemplateError as exc:
        diags.add("invalid_template", f"spec.outputs: {exc}", where)
        return False
    for ref in references:
        if ref.root == "vars" and (not ref.segments or ref.segments[0] not in run_vars):
            diags.add(
                "invalid_template",
                f"{where} reads `{ref.path}`, which no workflow-level variable defines",
                where,
                help="the outputs see spec.vars, spec.varsFiles and --var/--vars-file; an "
                "agent's or a task's variables are its own: pass such a value through a "
                "task's output",
            )
        elif ref.task_id is not None and diags.unknown(ref.task_id, graph):
            diags.add(
                "missing_reference",
                f"{where} reads unknown task `{ref.task_id}`",
                where,
                help="name a task of spec.tasks (an expanded task by its parent id)",
            )
    return any(ref.root == "vars" for ref in references)


def check_agent_references(env: Env, diags: Collector) -> None:
    for name, agent in env.agents.items():
        provider = agent.get("provider")
        if provider not in env.providers:
            diags.add(
                "missing_reference",
                f"agent `{name}` uses unknown provider `{provider}`",
                f"spec.agents.{name}.provider",
                help="declare it under spec.providers",
            )
        for index, tool in enumerate(agent.get("tools") or []):
            if tool not in env.tools:
                diags.add(
                    "missing_reference",
                    f"agent `{name}` uses unknown tool `{tool}`",
                    f"spec.agents.{name}.tools.{index}",
                    help="declare it under spec.tools",
                )


def check_compensation_reference(node: Node, env: Env, diags: Collector) -> dict[str, Any] | None:
    """The compensating action's definition, or None (reported) when it does not resolve."""
    compensate = node.task.get("compensate")
    if not isinstance(compensate, dict):
        return None
    uses = str(compensate.get("uses", ""))
    action = env.actions.get(uses.removeprefix("action:"))
    if not uses.startswith("action:") or not isinstance(action, dict):
        diags.add(
            "missing_reference",
            f"task `{node.task['id']}` compensates with unknown `{uses}`",
            f"{node.path}.compensate.uses",
            help="compensate.uses must name a spec.actions entry as action:NAME",
        )
        return None
    return action


def check_mcp_references(env: Env, graph: dict[str, Node], diags: Collector) -> None:
    """Every MCP server an ``mcp.tool`` or an ``mcp.call`` (literal ``with.server``) names."""
    servers = env.spec.get("mcpServers") or {}
    for tool_name, tool in env.tools.items():
        if isinstance(tool, dict) and tool.get("kind") == "mcp.tool":
            name = tool.get("server")
            if _unknown(name, servers):
                diags.add(
                    "missing_reference",
                    f"tool `{tool_name}` uses unknown MCP server `{name}`",
                    f"spec.tools.{tool_name}.server",
                    help="declare it under spec.mcpServers",
                )
    mcp = _RemoteCall(
        "mcp.call", "server", "tool", "MCP server", "mcpServers", "and the tool's name as `tool`"
    )
    _check_remote_calls(mcp, env, graph, diags)


def check_a2a_references(env: Env, graph: dict[str, Node], diags: Collector) -> None:
    """Every A2A peer an ``a2a.delegate`` (literal ``with.peer``) names, and its message."""
    a2a = _RemoteCall(
        "a2a.delegate", "peer", "message", "A2A peer", "a2aPeers", "and the text as `message`"
    )
    _check_remote_calls(a2a, env, graph, diags)


@dataclass(frozen=True)
class _RemoteCall:
    """An action kind that names a declared remote party in ``with`` and needs a second key."""

    kind: str
    party: str  # the `with` key naming the spec entry
    other: str  # the other required `with` key
    noun: str  # how messages name the party
    section: str  # the spec key declaring the parties
    then: str  # the end of the help for a missing key


def _unknown(name: Any, declared: Any) -> bool:
    # A template may render to any declared name: only a literal can be judged here.
    return isinstance(name, str) and OPEN not in name and name not in declared


def _check_remote_calls(
    call: _RemoteCall, env: Env, graph: dict[str, Node], diags: Collector
) -> None:
    kinds = (action.get("kind") for action in env.actions.values() if isinstance(action, dict))
    if call.kind not in kinds:
        return  # (no action of the kind: no task to look at)
    declared = env.spec.get(call.section) or {}
    for node in graph.values():
        action = env.action_of(node)
        if action is None or action.get("kind") != call.kind:
            continue
        given = {**(action.get("with") or {}), **(node.task.get("with") or {})}
        task_id = node.task.get("id")
        for key in (call.party, call.other):
            if key not in given:
                diags.add(
                    "schema_violation",
                    f"task `{task_id}`: {call.kind} needs `with.{key}`",
                    f"{node.path}.with",
                    help=f"give the spec.{call.section} key as `{call.party}` {call.then}",
                )
        name = given.get(call.party)
        if _unknown(name, declared):
            diags.add(
                "missing_reference",
                f"task `{task_id}` uses unknown {call.noun} `{name}`",
                f"{node.path}.with.{call.party}",
                help=f"declare it under spec.{call.section}",
            )
