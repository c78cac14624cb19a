"""A ``{process}`` secret helper's number settings are narrowed before they are converted.

The workflow schema makes ``timeoutSeconds`` and ``outputLimitBytes`` numbers; a reference
that reaches the resolver with an array or object there fails closed with a ``RunFailedError``
naming the setting (never Python's ``TypeError`` from ``int()``/``float()``), and an empty one
still means the default.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from agentctl.coordinator import secrets
from agentctl.core.jsonvalue import JsonValue
from agentctl.errors import PolicyDeniedError, RunFailedError

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


def test_a_helper_printing_bytes_that_are_not_utf8_fails_closed(tmp_path: Path) -> None:
    """As a file secret's: never a value silently altered by a replacement character."""
    printf = shutil.which("printf") or "/usr/bin/printf"
    ref: JsonValue = {"process": {"command": printf, "args": ["ab\\377cd"]}}
    policy: dict[str, JsonValue] = {"secretProcessAllowlist": ["printf"]}
    with pytest.raises(RunFailedError, match="did not print UTF-8"):
        secrets.resolve(ref, policy, str(tmp_path), "env TOKEN")


@pytest.mark.parametrize("where", ["/credential", "/headers/X-Org"])
def test_a_header_value_with_a_control_character_is_refused_naming_its_source(
    where: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("ORG_TOKEN", "t0k\r")
    ref: JsonValue = {"env": "ORG_TOKEN"}
    policy: dict[str, JsonValue] = {"environmentAllowlist": ["ORG_TOKEN"]}
    with pytest.raises(RunFailedError, match="env:ORG_TOKEN holds a control character") as got:
        secrets.resolve_pointers({}, {}, {where: ref}, (policy, str(tmp_path), "p"))
    assert "t0k" not in str(got.value)


def test_a_custom_ca_keeps_its_line_breaks(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A PEM bundle is lines of text, not a header: only headers are refused."""
    monkeypatch.setenv("CA_PEM", "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n")
    policy: dict[str, JsonValue] = {"environmentAllowlist": ["CA_PEM"]}
    request: dict[str, JsonValue] = {"egress": {"customCa": None}}
    got = secrets.resolve_pointers(
        {}, request, {"/egress/customCa": {"env": "CA_PEM"}}, (policy, str(tmp_path), "p")
    )
    assert got.request["egress"] == {"customCa": os.environ["CA_PEM"]}


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ("", "is empty or only whitespace"),
        (" \t ", "is empty or only whitespace"),
        (" t0k-4815", "begins or ends with whitespace"),
        ("t0k-4815 ", "begins or ends with whitespace"),
        ("t0k-4815\t", "begins or ends with whitespace"),
        ("t0k-é-4815", "holds a character outside ASCII"),
        ("t0k-\u2603-4815", "holds a character outside ASCII"),
    ],
)
@pytest.mark.parametrize("where", ["/credential", "/headers/X-Org"])
def test_a_value_no_header_can_carry_is_refused_naming_its_source_not_the_value(
    where: str, value: str, why: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """httpx sends a header's text as ASCII and h11 refuses one empty around its ends: such a
    value is refused where it is resolved, not at dispatch as a transport failure."""
    (tmp_path / "k.txt").write_text(value + "\n", encoding="utf-8")
    ref: JsonValue = {"file": "k.txt"}
    policy: dict[str, JsonValue] = {"secretFileRoots": ["."]}
    with pytest.raises(RunFailedError, match=f"the value from file:k.txt {why}") as got:
        secrets.resolve_pointers({}, {}, {where: ref}, (policy, str(tmp_path), "p"))
    assert "4815" not in str(got.value) and "which an HTTP header cannot carry" in str(got.value)


@pytest.mark.parametrize("value", ["sk-a b", "sk-a\tb", "x"])
def test_a_header_value_with_inner_whitespace_is_sent_as_it_is(
    value: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Space or tab between visible characters is a valid header value (h11's field-content)."""
    monkeypatch.setenv("ORG_TOKEN", value)
    policy: dict[str, JsonValue] = {"environmentAllowlist": ["ORG_TOKEN"]}
    got = secrets.resolve_pointers(
        {}, {}, {"/credential": {"env": "ORG_TOKEN"}}, (policy, str(tmp_path), "p")
    )
    assert got.request == {"credential": value} and got.values == (value,)


def test_an_action_env_value_is_not_held_to_header_rules(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A process's environment may carry any text: only headers are refused."""
    monkeypatch.setenv("PAD", " padded é ")
    policy: dict[str, JsonValue] = {"environmentAllowlist": ["PAD"]}
    values, _ = secrets.resolve_named({"PAD": {"env": "PAD"}}, policy, str(tmp_path), "t")
    assert values == {"PAD": " padded é "}


@pytest.mark.parametrize(("content", "found"), [(b"", "missing"), (b"\n", "present")])
def test_an_empty_secret_file_is_missing_as_an_empty_variable_is(
    content: bytes, found: str, tmp_path: Path
) -> None:
    """Judged by its size alone (no value is read): a file of one line break is present, and
    refused when it is resolved."""
    (tmp_path / "k.txt").write_bytes(content)
    policy: dict[str, JsonValue] = {"secretFileRoots": ["."]}
    assert secrets.availability({"file": "k.txt"}, policy, str(tmp_path)) == found
    assert secrets.availability({"file": "gone.txt"}, policy, str(tmp_path)) == "missing"


@pytest.mark.parametrize("blank", ["", " "])
def test_a_blank_secret_root_stored_before_check_refused_it_roots_nothing(
    blank: str, tmp_path: Path
) -> None:
    """A run stored with ``secretFileRoots: [""]`` (accepted before ``check`` refused it) and
    resumed: the entry names no directory, so it does not make the workspace a root."""
    (tmp_path / "k.txt").write_text("s3cret\n", encoding="utf-8")
    policy: dict[str, JsonValue] = {"secretFileRoots": [blank]}
    with pytest.raises(PolicyDeniedError, match=r"not under policy\.secretFileRoots"):
        secrets.resolve({"file": "k.txt"}, policy, str(tmp_path), "env TOKEN")
    policy = {"secretFileRoots": [blank, "."]}
    assert secrets.resolve({"file": "k.txt"}, policy, str(tmp_path), "env TOKEN").value == "s3cret"
