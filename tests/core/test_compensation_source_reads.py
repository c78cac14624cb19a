"""``core.recovery.source_reads``: a compensation step's task-output reads, from the source run."""

from __future__ import annotations

import pytest

from agentctl.core.recovery.source_reads import with_source_reads
from agentctl.core.templates import TemplateError

CONTEXT = {"tasks": {"p": {"output": {"v": "one", "n": 2, "ok": True, "t": "${{ inputs.x }}"}}}}


def test_reads_of_tasks_are_resolved_and_other_templates_stay() -> None:
    given = {
        "whole": "${{ tasks.p.output.n }}",
        "text": "v=${{ tasks.p.output.v }} x=${{ inputs.x }}",
        "cond": "${{ tasks.p.output.n > 1 }}",
        "list": ["${{ tasks.p.output.ok }}", "${{ memory.k }}", 4],
        "plain": "no template",
    }
    assert with_source_reads(given, CONTEXT) == {
        "whole": 2,
        "text": "v=one x=${{ inputs.x }}",
        "cond": True,
        "list": [True, "${{ memory.k }}", 4],
        "plain": "no template",
    }


def test_a_missing_output_or_an_opened_template_is_refused() -> None:
    with pytest.raises(TemplateError, match=r"undefined value `tasks\.p\.output\.gone`"):
        with_source_reads("${{ tasks.p.output.gone }}", CONTEXT)
    with pytest.raises(TemplateError, match="undefined value"):
        with_source_reads("a ${{ tasks.q.output }}", CONTEXT)
    # Text put into a template that stays one would be scanned as a template: refused.
    with pytest.raises(TemplateError, match="take for a template"):
        with_source_reads("t=${{ tasks.p.output.t }} ${{ inputs.x }}", CONTEXT)
    # As a whole value too: the compensation run renders its `with`, and would read it.
    with pytest.raises(TemplateError, match="take for a template"):
        with_source_reads({"c": "${{ tasks.p.output }}"}, CONTEXT)
