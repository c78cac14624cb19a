"""Every name pattern of the workflow language matches the whole text: Python's ``$`` also
matches before a final newline, so a pattern ending in ``$`` let ``"a\\n"`` pass where the
original's (Rust's) does not. Each pattern, with a value it takes: the value passes, the value
followed by a newline does not."""

from __future__ import annotations

import re

import pytest

from agentctl import cli_vars
from agentctl.core.dsl import actions, agents, base, packs, settings, tasks
from agentctl.core.packs import integrity, manifest

DIGEST = "sha256:" + "a" * 64
PATTERNS: list[tuple[str, re.Pattern[str], str]] = [
    ("identifier", base.IDENTIFIER_RE, "name_1"),
    ("env name", base.ENV_NAME_RE, "API_KEY"),
    ("task id", tasks.TASK_ID_RE, "build-1"),
    ("uses", tasks.USES_RE, "action:save"),
    ("sub-workflow version", tasks.SEMVER_RE, "1.2.3-rc.1"),
    ("tool name", agents.TOOL_NAME_RE, "save-file"),
    ("image digest", actions._DIGEST_RE, "busybox@" + DIGEST),
    ("host pattern", settings._HOST_PATTERN_RE, "*.example.com"),
    ("pricing model key", settings._MODEL_KEY_RE, "openai/gpt-x"),
    ("pack name", packs.PACK_NAME_RE, "acme.tools"),
    ("pack revision", packs._REV_RE, "0" * 40),
    ("integrity hex", integrity._HEX_RE, DIGEST),
    ("integrity sri", integrity._SRI_RE, "sha256-" + "A" * 43 + "="),
    ("manifest item", manifest._ITEM_RE, "lint_step"),
    ("manifest path segment", manifest._SEGMENT_RE, "file.v1"),
    ("--var name", cli_vars._NAME, "k8"),
]


@pytest.mark.parametrize(("what", "pattern", "good"), PATTERNS, ids=[p[0] for p in PATTERNS])
def test_a_pattern_takes_the_whole_text_only(
    what: str, pattern: re.Pattern[str], good: str
) -> None:
    assert pattern.match(good), what
    assert not pattern.match(good + "\n"), what
