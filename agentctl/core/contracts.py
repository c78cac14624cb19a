"""A task's output contract (spec/dsl.md §4.13) and the fingerprint the ledger records of it.

Job: one definition, shared by the coordinator (which records the fingerprint as each task
completes) and the recovery planners (which compare it on reuse). Pure and light: the
coordinator's run path imports it without the recovery package.

Invariants: a task's contract is its ``outputSchema``, else an agent's ``structuredOutput``,
else the default contract (a JSON object); only an absent schema means the default — ``{}`` is
a contract of its own.
"""

from __future__ import annotations

from agentctl.core.canonical import v1_digest
from agentctl.core.jsonvalue import JsonObject
from agentctl.core.plan import PlannedTask

DEFAULT_OUTPUT_CONTRACT: JsonObject = {"type": "object"}


def output_contract_fingerprint(task: PlannedTask) -> str:
    """The fingerprint of a task's output contract; the ledger stores the same value.

    Only an absent schema means the default contract: ``{}`` is a contract of its own.
    """
    return v1_digest(contract_of(task))


def contract_of(task: PlannedTask) -> JsonObject:
    """A task's output contract (spec/dsl.md §4.13): its ``outputSchema``, else an agent's
    ``structuredOutput``, else the default contract."""
    if task.output_schema is not None:
        return task.output_schema
    structured = structured_output_of(task)
    return DEFAULT_OUTPUT_CONTRACT if structured is None else structured


def legacy_contract_fingerprint(task: PlannedTask) -> str | None:
    """The fingerprint runs recorded for ``task`` before an agent's ``structuredOutput`` was
    counted as its contract (the default contract's), when that differs from today's; else
    None. Such a record says nothing about the schema, which the definition fingerprint
    (covering the agent's configuration) still compares."""
    if task.output_schema is None and structured_output_of(task) is not None:
        return v1_digest(DEFAULT_OUTPUT_CONTRACT)
    return None


def structured_output_of(task: PlannedTask) -> JsonObject | None:
    """An agent task's ``structuredOutput``: the schema its output was validated against when
    it ran (part of its definition fingerprint, so a reused output met the same schema)."""
    schema = task.agent_config.agent.get("structuredOutput") if task.agent_config else None
    return schema if isinstance(schema, dict) else None
