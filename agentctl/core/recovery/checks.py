"""The per-task rules of retry and repair: reuse compatibility and closure-effect safety.

``reuse_block`` applies the reuse rules of spec/cli.md §5 to one target task outside the
execution closure, in the spec's order, and returns the first that fails (one block per task).
``resolved_input_digest_mismatch`` is absent here: the resolved input of a reused task depends
on the memory the *new* run rebuilds from the other reused tasks, so ``inputs.input_blocks``
checks it once the reusable set is known.

``closure_effect_blocks`` judges the source effects of a task that will execute again: an
unresolved effect, or a confirmed non-idempotent mutation/remote action that was not
compensated, would be repeated blindly, so it blocks.

Invariants: pure and total — every function only reads its arguments (the stored output is
never mutated, digests are recomputed from it) and a malformed stored value yields a block,
never an exception.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from agentctl.core import jsonschema
from agentctl.core.canonical import json_digest, v1_digest
from agentctl.core.contracts import (
    contract_of,
    legacy_contract_fingerprint,
    output_contract_fingerprint,
    structured_output_of,
)
from agentctl.core.effects import MUTATION_CLASSES
from agentctl.core.jsonvalue import JsonValue
from agentctl.core.plan import PlannedTask
from agentctl.core.recovery.model import (
    Block,
    SourceEffect,
    SourceTask,
    effective_outcome,
    unresolved_message,
)
from agentctl.errors import ValidationError

ArtifactCheck = Callable[[str, int], bool]

_NON_IDEMPOTENT = frozenset({"unknown", "at_most_once"})


@dataclass(frozen=True)
class ReuseContext:
    """One target task, its source record and what the rules need to know about the graph."""

    run_id: str
    task: PlannedTask
    source: SourceTask
    feeds_others: bool  # some target task needs this one
    artifact_ok: ArtifactCheck
    # The target workflow's digest is the source run's: a changed definition then comes from
    # what the compile read besides the document (CLI vars, var files' contents).
    same_workflow: bool = False


def digest_matches(stored: str, value: JsonValue) -> bool:
    """Recompute the digest of ``value`` in the format ``stored`` uses (v1-prefixed or bare)."""
    if stored.startswith("sha256:v1:"):
        return stored == v1_digest(value)
    return stored == json_digest(value)


def new_task_block(task: PlannedTask) -> Block:
    return Block(
        task.id,
        "new_task_outside_repair_closure",
        f"task {task.id} is new in the target workflow and outside the execution closure; "
        f"add it as a root (--from {task.id})",
        None,
        task.definition_fingerprint or None,
        (task.id,),
    )


def reuse_block(ctx: ReuseContext) -> Block | None:
    """The first reuse rule ``ctx.source`` fails for ``ctx.task``, or None when reusable."""
    for rule in _RULES:
        found = rule(ctx)
        if found is not None:
            rule_name, message = found
            return _block(ctx, rule_name, message)
    return None


def _block(ctx: ReuseContext, rule: str, message: str) -> Block:
    if rule == "output_contract_mismatch":
        source_fp = ctx.source.output_contract_fingerprint
        target_fp: str | None = output_contract_fingerprint(ctx.task)
    else:
        source_fp = ctx.source.definition_fingerprint
        target_fp = ctx.task.definition_fingerprint or None
    return Block(ctx.task.id, rule, message, source_fp, target_fp, (ctx.task.id,))


Finding = tuple[str, str] | None


def _successful(ctx: ReuseContext) -> Finding:
    if ctx.source.state == "succeeded":
        return None
    return (
        "source_task_not_successful",
        f"task {ctx.task.id} ended {ctx.source.state} in run {ctx.run_id}; only a succeeded "
        f"task can be reused — add it as a root (--from {ctx.task.id})",
    )


def _metadata(ctx: ReuseContext) -> Finding:
    src = ctx.source
    if src.definition_fingerprint and src.output_contract_fingerprint:
        return None
    return (
        "legacy_task_metadata",
        f"task {ctx.task.id} of run {ctx.run_id} has no v1 reuse metadata (definition and "
        "output-contract fingerprints); it must execute again",
    )


def _contract(ctx: ReuseContext) -> Finding:
    recorded = ctx.source.output_contract_fingerprint
    if recorded in (output_contract_fingerprint(ctx.task), legacy_contract_fingerprint(ctx.task)):
        return None
    return (
        "output_contract_mismatch",
        f"the output contract of task {ctx.task.id} changed since run {ctx.run_id}",
    )


def _dependencies(ctx: ReuseContext) -> Finding:
    before, after = sorted(set(ctx.source.needs)), sorted(set(ctx.task.needs))
    if before == after:
        return None
    return (
        "dependency_set_mismatch",
        f"the needs of task {ctx.task.id} changed from {before} to {after}",
    )


def _definition(ctx: ReuseContext) -> Finding:
    if ctx.source.definition_fingerprint == ctx.task.definition_fingerprint:
        return None
    message = f"the definition of task {ctx.task.id} changed since run {ctx.run_id}"
    return ("definition_fingerprint_mismatch", message + _vars_hint(ctx))


def _vars_hint(ctx: ReuseContext) -> str:
    """Why an unchanged workflow's task differs, when its stored variables tell: the source
    run was compiled with other variable values. The ledger keeps each task's merged
    variables, not which layer gave them, so a var file edited since is named too."""
    before, after = ctx.source.vars, ctx.task.vars
    if not ctx.same_workflow or before is None or before == after:
        return ""
    names = sorted(
        k for k in {*before, *after} if (k in before, before.get(k)) != (k in after, after.get(k))
    )
    return (
        f": the workflow is the same but its variables differ in {', '.join(names)}, so that "
        "run was compiled with other --var/--vars-file values (or var files edited since); "
        "give the same --var/--vars-file values as that run to reuse the task"
    )


def _effects_resolved(ctx: ReuseContext) -> Finding:
    for effect in ctx.source.producing():
        outcome = effective_outcome(effect)
        if outcome == "unresolved":
            return (
                "unresolved_reused_effect",
                f"effect {effect.effect_id} ({effect.operation}) of task {ctx.task.id} is "
                f"{effect.status} with no reconciliation; reconcile it "
                f"(`agentctl effects reconcile {effect.effect_id} --status applied|not-applied "
                "--reason …`) or execute the task again",
            )
        if outcome == "compensated":
            return (
                "reuse_effect_provenance",
                f"effect {effect.effect_id} ({effect.operation}) of task {ctx.task.id} was "
                "compensated, so its recorded result no longer holds; execute the task again",
            )
    return None


def _output_contract_present(ctx: ReuseContext) -> Finding:
    task = ctx.task
    if task.kind != "agent" or task.output_schema is not None or not ctx.feeds_others:
        return None
    if structured_output_of(task) is not None:
        return None  # structuredOutput is the agent's output contract (spec/dsl.md §4.13)
    return (
        "missing_output_contract",
        f"agent task {task.id} feeds other tasks but declares neither an outputSchema nor a "
        "structuredOutput, so its stored output cannot be trusted as their input; add one "
        "or execute it again",
    )


def _output_digest(ctx: ReuseContext) -> Finding:
    stored, output = ctx.source.output_digest, ctx.source.output
    if stored is None and output is None:
        return None
    if stored is not None and digest_matches(stored, output):
        return None
    return (
        "output_digest_mismatch",
        f"the stored output of task {ctx.task.id} does not match its recorded digest {stored}",
    )


def _output_valid(ctx: ReuseContext) -> Finding:
    schemas = [contract_of(ctx.task)]
    structured = structured_output_of(ctx.task)
    if structured is not None and structured is not schemas[0]:
        schemas.append(structured)
    try:
        problems = [
            p for s in schemas if s is not None for p in jsonschema.validate(ctx.source.output, s)
        ]
    except ValidationError as exc:
        problems = [str(exc)]
    if not problems:
        return None
    return (
        "output_contract_validation",
        f"the stored output of task {ctx.task.id} violates the target output contract: "
        + "; ".join(problems[:3]),
    )


def _artifacts(ctx: ReuseContext) -> Finding:
    for artifact in ctx.source.artifacts:
        path, digest, size = artifact.get("path"), artifact.get("digest"), artifact.get("sizeBytes")
        intact = isinstance(digest, str) and isinstance(size, int) and ctx.artifact_ok(digest, size)
        if not intact:
            return (
                "artifact_integrity",
                f"artifact {path} (digest {digest}, {size} bytes) of task {ctx.task.id} is "
                "missing or corrupt in the artifact store",
            )
    return None


def _state_delta(ctx: ReuseContext) -> Finding:
    delta, allowed = ctx.source.state_delta, ctx.task.memory_writes
    if delta is None:
        if not allowed:
            return None
        return (
            "state_delta_missing",
            f"task {ctx.task.id} writes working memory {list(allowed)} but run {ctx.run_id} "
            "stored no state delta for it",
        )
    if not isinstance(delta, dict):
        return ("state_delta_invalid", f"the state delta of task {ctx.task.id} is not an object")
    stray = sorted(str(key) for key in delta if key not in allowed)
    if not stray:
        return None
    return (
        "state_delta_invalid",
        f"the state delta of task {ctx.task.id} writes {stray}, outside its memory write set "
        f"{list(allowed)}",
    )


_RULES: tuple[Callable[[ReuseContext], Finding], ...] = (
    _successful,
    _metadata,
    _contract,
    _dependencies,
    _definition,
    _effects_resolved,
    _output_contract_present,
    _output_digest,
    _output_valid,
    _artifacts,
    _state_delta,
)


# --- effects of tasks that execute again ---------------------------------------------------


def is_unsafe_to_repeat(effect: SourceEffect) -> bool:
    """A confirmed (or applied-reconciled) non-idempotent mutation or remote action."""
    # A membership test, not is_mutation(): an unknown class string must not raise here.
    risky = effect.effect_class in MUTATION_CLASSES or effect.effect_class == "network"
    return risky and effect.idempotency in _NON_IDEMPOTENT


def closure_effect_blocks(task_id: str, source: SourceTask) -> Iterator[Block]:
    """One ``unreconciled_effect`` block per source effect that executing again would repeat,
    a reused task's inherited ones included; ``indirect_effect_history`` when those are lost."""
    if source.inherited_effects is None:
        yield Block(
            task_id,
            "indirect_effect_history",
            f"task {task_id} was reused from a run that no longer exists, so the effects that "
            "produced its result cannot be checked; recover an earlier run instead, or fork",
            source.definition_fingerprint,
            full_fork_required=True,
        )
    for effect in source.history():
        outcome = effective_outcome(effect)
        if outcome == "unresolved":
            yield Block(
                task_id,
                "unreconciled_effect",
                unresolved_message(task_id, effect),
                source.definition_fingerprint,
            )
        elif outcome == "applied" and is_unsafe_to_repeat(effect):
            yield Block(
                task_id,
                "unreconciled_effect",
                f"effect {effect.effect_id} ({effect.operation}, {effect.effect_class}, "
                f"idempotency {effect.idempotency}) of task {task_id} took effect and executing "
                "the task again would repeat it; compensate it and record the compensated "
                "reconciliation first",
                source.definition_fingerprint,
            )
