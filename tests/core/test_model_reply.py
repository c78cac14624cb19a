"""A model call's reconciled answer is judged by its shape, whatever name the call was recorded
under: the provider kind (``fake``) or, in ledgers written before, ``model.fake``."""

from __future__ import annotations

from agentctl.core.model_reply import applied_reply_problems

REPLY = {"finish": "complete", "text": "ok", "toolCalls": [], "usage": {}}


def test_model_calls_by_either_name_are_judged_and_other_effects_are_not() -> None:
    for operation in ("fake", "openai", "model.fake", "model.anthropic"):
        assert applied_reply_problems(operation, REPLY) == []
        assert applied_reply_problems(operation, {"text": "no finish"}), operation
    assert applied_reply_problems("builtin.write", {"text": "no finish"}) == []
