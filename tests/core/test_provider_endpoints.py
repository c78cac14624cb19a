"""``endpoint_problem``: the one rule for a provider endpoint's path, which the worker's
adapters apply to a call and ``run`` to the plan before any state exists."""

from __future__ import annotations

import pytest

from agentctl.core.providerdefaults import DEFAULT_ENDPOINTS, endpoint_problem


@pytest.mark.parametrize("kind", sorted(DEFAULT_ENDPOINTS))
def test_every_default_endpoint_is_of_its_kinds_form(kind: str) -> None:
    assert endpoint_problem(kind, DEFAULT_ENDPOINTS[kind]) is None
    assert endpoint_problem(kind, DEFAULT_ENDPOINTS[kind] + "/") is None  # a trailing slash


@pytest.mark.parametrize(
    ("kind", "endpoint", "words"),
    [
        ("openai", "https://api.openai.com/v1", "an openai endpoint ends with /responses"),
        ("anthropic", "https://api.anthropic.com/messages", "ends with /v1/messages"),
        ("google", "https://g.example/v1beta", "ends with /{apiVersion}/models"),
        # /models with no version segment before it: the SDK needs the two apart.
        ("google", "https://g.example/models", "ends with /{apiVersion}/models"),
    ],
)
def test_an_endpoint_of_another_form_is_refused_with_its_kinds_rule(
    kind: str, endpoint: str, words: str
) -> None:
    problem = endpoint_problem(kind, endpoint)
    assert problem is not None and words in problem and problem.endswith(endpoint)


@pytest.mark.parametrize("kind", ["azure_openai", "fake"])
def test_kinds_whose_endpoint_names_a_resource_have_no_path_rule(kind: str) -> None:
    assert endpoint_problem(kind, "https://name.openai.azure.com") is None
