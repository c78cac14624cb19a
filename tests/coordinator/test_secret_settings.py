"""A ``{process}`` secret helper's number settings are narrowed before they are converted.

The workflow schema makes ``timeoutSeconds`` and ``outputLimitBytes`` numbers; a reference
that reaches the resolver with an array or object there fails closed with a ``RunFailedError``
naming the setting (never Python's ``TypeError`` from ``int()``/``float()``), and an empty one
still means the default.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from agentctl.coordinator import secrets
from agentctl.core.jsonvalue import JsonValue
from agentctl.errors import RunFailedError

ECHO = shutil.which("echo") or "/bin/echo"
POLICY: dict[str, JsonValue] = {"secretProcessAllowlist": ["echo"]}


@pytest.mark.parametrize("key", ["timeoutSeconds", "outputLimitBytes"])
@pytest.mark.parametrize("value", [[5], {"n": 5}])
def test_a_non_numeric_setting_fails_closed(key: str, value: JsonValue, tmp_path: Path) -> None:
    ref: JsonValue = {"process": {"command": ECHO, "args": ["s3cret"], key: value}}
    with pytest.raises(RunFailedError, match=f"setting {key} is not a number"):
        secrets.resolve(ref, POLICY, str(tmp_path), "env TOKEN")


@pytest.mark.parametrize("empty", [[], {}, None, 0])
def test_an_empty_setting_means_the_default(empty: JsonValue, tmp_path: Path) -> None:
    spec: JsonValue = {"command": ECHO, "args": ["s3cret"], "timeoutSeconds": empty}
    got = secrets.resolve({"process": spec}, POLICY, str(tmp_path), "env TOKEN")
    assert (got.value, got.source) == ("s3cret", f"process:{ECHO}")
