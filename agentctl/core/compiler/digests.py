"""Workflow digest, plan digest and per-task definition fingerprints (spec/dsl.md §9).

Invariants: every digest is taken over canonical JSON (sorted keys, compact, non-ASCII kept),
so dict key order in the source never matters while any semantic change does.
- ``workflow_digest``: bare sha256 hex of the normalized document after sub-workflow
  flattening (``spec.tasks`` replaced by the flattened tasks, ``spec.subworkflows`` dropped).
- ``plan_digest``: bare sha256 hex of {name, workflowDigest, order, maxConcurrency, tasks,
  requirements}.
- ``definition_fingerprint``: ``sha256:v1:`` digest of the task's static definition (position
  excluded) plus the resolved action or agent (with its provider and tools) it runs.

A compile encodes each task's definition once (``TaskTexts``): its fingerprint, its member of
the plan digest and its stored form's text (``stored``, carried by the plan to the run's
creation) are made from the same runs of canonical JSON, and each shared action or agent
definition is encoded once, not once per task using it. When the flattened tasks are
the document's own as written (no sub-workflow inlined, no default filled in), the workflow
digest's text is the document's canonical JSON less its ``spec.subworkflows`` member: both
come from one encoding (``workflow_digest_and_text``), and the run's creation stores that text
instead of encoding the document again.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from json.encoder import encode_basestring
from typing import Any

from agentctl.core.canonical import Items, canonical_json, sha256_hex, streamed_json_digest
from agentctl.core.compiler.ir import Env, Source
from agentctl.core.compiler.serialize import compensation_json, route_json
from agentctl.core.plan import PlannedTask

# ``definition_json``'s keys in canonical (sorted) order, cut where ``task_json`` adds its two
# (``definitionFingerprint``, ``position``) and the stored form its ``operation``: every text
# is then joined from the same runs.
_BEFORE_FINGERPRINT = ("action", "agent", "bindings", "children", "compensate")
_BEFORE_OPERATION = ("failure", "guard", "id", "kind", "maxIterations", "memoryWrites", "needs")
_BEFORE_POSITION = ("outputSchema", "parent")
_AFTER_POSITION = ("retry", "route", "timeoutSeconds", "uses", "vars", "when", "with")
DEFINITION_KEYS = (*_BEFORE_FINGERPRINT, *_BEFORE_OPERATION, *_BEFORE_POSITION, *_AFTER_POSITION)


def workflow_digest(doc: dict[str, Any], sources: list[Source]) -> str:
    """The digest of the flattened document, hashed task by task (never the whole text)."""
    spec = {key: value for key, value in doc["spec"].items() if key != "subworkflows"}
    spec["tasks"] = Items(source.to_json() for source in sources)
    return streamed_json_digest({**doc, "spec": spec})


def workflow_digest_and_text(doc: dict[str, Any], sources: list[Source]) -> tuple[str, str | None]:
    """``workflow_digest(doc, sources)``, and ``canonical_json(doc)`` when the flattened tasks
    are the document's own as written (else None: the digest is streamed, no text is made).

    The digest is hashed from the text itself, less the ``spec.subworkflows`` member, slice by
    slice: beside the one text, no copy of it is made (~3 MB at 10,000 tasks, at the end of the
    compile, when it holds most)."""
    if not _written_as_flattened(doc["spec"].get("tasks"), sources):
        return workflow_digest(doc, sources), None
    text = canonical_json(doc)
    span = _subworkflows_member(doc, text)
    if span is None:  # (never seen: the encoder spelled a member otherwise; stream it instead)
        return workflow_digest(doc, sources), None
    start, end = span
    digest = hashlib.sha256()
    for begin, stop in ((0, start), (end, len(text))):
        for at in range(begin, stop, _HASH_SLICE):
            digest.update(text[at : min(at + _HASH_SLICE, stop)].encode("utf-8"))
    return digest.hexdigest(), text


# Characters of the document's text hashed at a time (each slice encoded apart).
_HASH_SLICE = 1 << 16


def _written_as_flattened(tasks: object, sources: list[Source]) -> bool:
    """Whether ``sources`` are ``tasks`` one for one, each as written (so equal encodings):
    ``with_defaults`` replaces only a missing or None value, which equality tells apart."""
    return (
        isinstance(tasks, list)
        and len(tasks) == len(sources)
        and all(s.role == "task" and s.task == t for s, t in zip(sources, tasks, strict=True))
    )


def _subworkflows_member(doc: dict[str, Any], text: str) -> tuple[int, int] | None:
    """Where in ``text``, the canonical JSON of ``doc``, its ``spec.subworkflows`` member lies
    with the comma that joins it to a neighbour (an empty span where the member would be if
    there is none). Found from the encodings of what precedes it (the encoder sorts keys as
    ``<`` does), never by searching, and checked against the text: None if it does not match
    there (the digest is then streamed as when there is no text)."""
    spec = doc["spec"]
    doc_before = canonical_json({k: v for k, v in doc.items() if k < "spec"})[1:-1]
    spec_before = canonical_json({k: v for k, v in spec.items() if k < "subworkflows"})[1:-1]
    head = "{" + doc_before + ("," if doc_before else "") + '"spec":{' + spec_before
    member = ""
    if "subworkflows" in spec:
        member = f'"subworkflows":{canonical_json(spec["subworkflows"])}'
        if spec_before:
            member = "," + member
        elif any(k > "subworkflows" for k in spec):
            member += ","
    start, end = len(head), len(head) + len(member)
    if text[:start] != head or text[start:end] != member:
        return None
    return start, end


def resolved_definition(task: PlannedTask, env: Env) -> dict[str, Any] | None:
    if task.action is not None:
        return {"action": env.actions.get(task.action)}
    if task.agent is None:
        return None
    agent = env.agents.get(task.agent) or {}
    tools = {name: env.tools.get(name) for name in agent.get("tools") or []}
    return {
        "agent": agent,
        "provider": env.providers.get(str(agent.get("provider"))),
        "tools": tools,
    }


# Where a stored task text holds its ``operation`` member (``TaskTexts``); None: the text is
# the ``task_json`` text, with no stored form.
Span = tuple[int, int] | None


def task_json_text(text: str, span: Span) -> str:
    """The ``task_json`` text of a ``TaskTexts`` text with the ``span`` it was given."""
    return text if span is None else text[: span[0]] + text[span[1] :]


class TaskTexts:
    """One compile's encoder of tasks: a task's fingerprint, its canonical ``task_json`` text
    (the plan digest's member) and its stored form's text, from one encoding of its
    definition."""

    def __init__(self, env: Env) -> None:
        self.env = env
        self._uses: dict[tuple[str | None, str | None], str] = {}
        self._operations: dict[str | None, str] = {}
        # Runs of members most tasks of one action share (``_head``, ``_settings``).
        self._heads: dict[tuple[str | None, str | None], str] = {}
        self._settings: dict[tuple[int, int, int, str], str] = {}

    def fingerprint_and_text(self, task: PlannedTask, position: int) -> tuple[str, str, Span]:
        """``task``'s definition fingerprint, and a text: the canonical JSON of its stored
        form (``stored._stored_task``: ``task_json`` and ``operation``) with the span of its
        ``operation`` member, whose removal leaves its ``task_json`` text (``task_json_text``)
        once it has ``position`` and that fingerprint (the task's own ``position`` is not
        read); for a sub-workflow boundary or an agent task with its own timeout (their stored
        forms have a key more, ``stored._stored_task``), that text and no span."""
        head, early, late, tail = self._runs(task)
        # = v1_digest({"task": definition_json(task), "uses": resolved_definition(task, env)})
        text = f'{{"task":{{{head},{early},{late},{tail}}},"uses":{self._uses_text(task)}}}'
        fingerprint = "sha256:v1:" + sha256_hex(text)
        # The fingerprint is hex after a fixed prefix: its JSON is itself in quotes.
        before = f'{{{head},"definitionFingerprint":"{fingerprint}",{early},'
        after = f'{late},"position":{int(position)},{tail}}}'
        if task.subworkflow is not None or task.agent_timeout_seconds is not None:
            return fingerprint, before + after, None
        member = f'"operation":{self._operation_text(task.operation)},'
        return fingerprint, before + member + after, (len(before), len(before) + len(member))

    def _runs(self, task: PlannedTask) -> tuple[str, str, str, str]:
        """The canonical JSON members of ``definition_json(task)`` (no braces), in the four
        runs cut at ``_BEFORE_FINGERPRINT``, ``_BEFORE_OPERATION``, ``_BEFORE_POSITION`` and
        ``_AFTER_POSITION``: spelled member by member from the task's fields (the same keys
        and values as ``definition_json``, which the tests hold them to), not by encoding
        four dicts built from it (3.1 us a task against 9.7 us, 1,000-task chain)."""
        early = (
            f'"failure":{_json(task.failure)},"guard":{_json(task.guard)},"id":{_json(task.id)},'
            f'"kind":{_json(task.kind)},"maxIterations":{_json(task.max_iterations)},'
            f'"memoryWrites":{_json(task.memory_writes)},"needs":{_json(task.needs)}'
        )
        late = f'"outputSchema":{_json(task.output_schema)},"parent":{_json(task.parent)}'
        tail = (
            f'{self._settings_run(task)},"vars":{_json(task.vars)},"when":{_json(task.when)},'
            f'"with":{_json(task.with_)}'
        )
        return self._head(task), early, late, tail

    def _head(self, task: PlannedTask) -> str:
        """The ``action`` … ``compensate`` members; for a task with no bindings, children or
        compensation, made once per action or agent (~0.5 us a task less)."""
        if task.bindings == {} and task.children == () and task.compensate is None:
            key = (task.action, task.agent)
            known = self._heads.get(key)
            if known is None:
                known = self._heads[key] = _head(task)
            return known
        return _head(task)

    def _settings_run(self, task: PlannedTask) -> str:
        """The ``retry`` … ``uses`` members; made once per retry, timeout and uses where
        there is no route and every number is an int (an equal bool or float, spelled
        otherwise, never shares one)."""
        r, timeout = task.retry, task.timeout_seconds
        attempts, backoff = r.max_attempts, r.backoff_ms
        if task.route is None and type(attempts) is type(backoff) is type(timeout) is int:
            key = (attempts, backoff, timeout, task.uses)
            known = self._settings.get(key)
            if known is None:
                known = self._settings[key] = _settings(task)
            return known
        return _settings(task)

    def _operation_text(self, operation: str | None) -> str:
        known = self._operations.get(operation)
        if known is None:
            known = self._operations[operation] = canonical_json(operation)
        return known

    def _uses_text(self, task: PlannedTask) -> str:
        key = (task.action, task.agent)
        known = self._uses.get(key)
        if known is None:
            known = self._uses[key] = canonical_json(resolved_definition(task, self.env))
        return known


def _head(task: PlannedTask) -> str:
    return (
        f'"action":{_json(task.action)},"agent":{_json(task.agent)},'
        f'"bindings":{_json(task.bindings)},"children":{_json(task.children)},'
        f'"compensate":{_json(compensation_json(task.compensate))}'
    )


def _settings(task: PlannedTask) -> str:
    r = task.retry
    return (
        f'"retry":{{"backoffMs":{_json(r.backoff_ms)},"maxAttempts":{_json(r.max_attempts)}}},'
        f'"route":{_json(route_json(task.route))},"timeoutSeconds":{_json(task.timeout_seconds)},'
        f'"uses":{_json(task.uses)}'
    )


def _json(value: object) -> str:
    """``canonical_json(value)``, the values most members hold spelled here as the encoder
    spells them (a str by the encoder's own ``encode_basestring``, an int by ``int.__repr__``,
    an empty array or object, a one-string array; a bool, a float or a subclass is left to
    it): no encoder call for most members."""
    if value is None:
        return "null"
    if type(value) is str:
        return encode_basestring(value)
    if type(value) is int:
        return int.__repr__(value)
    if type(value) is tuple or type(value) is list:
        if not value:
            return "[]"
        if len(value) == 1 and type(value[0]) is str:
            return f"[{encode_basestring(value[0])}]"
    elif type(value) is dict and not value:
        return "{}"
    return canonical_json(value)


def plan_digest(
    name: str,
    workflow: str,
    order: tuple[str, ...],
    max_concurrency: int,
    task_texts: Iterable[str],
    requirements: dict[str, Any],
) -> str:
    """``task_texts``: each task's ``task_json`` as canonical JSON (``TaskTexts``), in order."""
    # Hashed task by task: the whole plan as one text was the compiler's peak of memory.
    return streamed_json_digest(
        {
            "name": name,
            "workflowDigest": workflow,
            "order": list(order),
            "maxConcurrency": max_concurrency,
            "tasks": Items(task_texts, encoded=True),
            "requirements": requirements,
        }
    )
