"""Secret references: ``{env: NAME}``, ``{file: PATH}`` or ``{process: {...}}`` (spec/dsl.md §2).

Invariants:
- A reference is exactly one of the three shapes; anything else (a plain string, an object with
  none or several of the keys) fails with ``invalid_secret_reference``.
- The normalized form dumps back to the same one-key object, with process defaults filled in.
- ``EnvValue`` (action ``env`` only) also takes a string holding a ``${{ … }}`` template: it
  renders per task into plain data (``core.actionconfig``) and is never a secret.
- Look-alike objects inside ``with`` / ``vars`` are never validated here: only the positions the
  spec lists use ``SecretRef`` (provider credential/headers, action env, tool secrets, MCP and
  A2A headers, policy.network.customCa).
- Rules that need the policy (file roots, process allowlist) live in ``rules.py``.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Discriminator, Field, Tag, field_validator

from agentctl.core.dburl import url_scheme
from agentctl.core.dsl.base import ENV_NAME_RE, Program, StrictModel, rule_error

_SHAPES = ("env", "file", "process")


class EnvSecret(StrictModel):
    env: str

    @field_validator("env")
    @classmethod
    def _name(cls, value: str) -> str:
        if not ENV_NAME_RE.match(value):
            raise rule_error(
                "invalid_secret_reference",
                f"environment variable name {value!r} is not valid",
                help="use letters, digits and underscores, not starting with a digit",
            )
        return value


class FileSecret(StrictModel):
    file: str

    @field_validator("file")
    @classmethod
    def _path(cls, value: str) -> str:
        if not value or "\0" in value:
            raise rule_error("invalid_secret_reference", "secret file path must be non-empty")
        if url_scheme(value) is not None:
            raise rule_error(
                "invalid_secret_reference",
                f"secret file path {value!r} is a URL; a file secret is read from a local file",
                help="write a path under one of policy.secretFileRoots",
            )
        return value


class ProcessCommand(StrictModel):
    command: Program
    args: list[str] = Field(default_factory=list, max_length=64)
    timeout_seconds: int = Field(5, alias="timeoutSeconds", ge=1, le=60)
    output_limit_bytes: int = Field(16_384, alias="outputLimitBytes", ge=1, le=65_536)

    @field_validator("args")
    @classmethod
    def _arg_sizes(cls, value: list[str]) -> list[str]:
        for index, arg in enumerate(value):
            if len(arg.encode("utf-8", "surrogatepass")) > 4096:
                raise rule_error(
                    "invalid_secret_reference",
                    f"secret process argument {index} is longer than 4096 bytes",
                )
        return value


class ProcessSecret(StrictModel):
    process: ProcessCommand


def _shape(value: Any) -> str | None:
    # Called with raw data when validating and with model instances when serializing.
    if isinstance(value, (EnvSecret, FileSecret, ProcessSecret)):
        return _SHAPES[(EnvSecret, FileSecret, ProcessSecret).index(type(value))]
    if not isinstance(value, dict):
        return None
    present = [key for key in _SHAPES if key in value]
    return present[0] if len(present) == 1 else None


def _env_shape(value: Any) -> str | None:
    if isinstance(value, str):
        return "text" if "${{" in value else None
    return _shape(value)


SecretRef = Annotated[
    Annotated[EnvSecret, Tag("env")]
    | Annotated[FileSecret, Tag("file")]
    | Annotated[ProcessSecret, Tag("process")],
    Discriminator(
        _shape,
        custom_error_type="invalid_secret_reference",
        custom_error_message=(
            "a secret reference must be exactly one of `env: NAME`, `file: PATH` "
            "or `process: {command, args}`"
        ),
    ),
]
"""A validated secret reference; see the module docstring."""

EnvValue = Annotated[
    Annotated[str, Tag("text")]
    | Annotated[EnvSecret, Tag("env")]
    | Annotated[FileSecret, Tag("file")]
    | Annotated[ProcessSecret, Tag("process")],
    Discriminator(
        _env_shape,
        custom_error_type="invalid_secret_reference",
        custom_error_message=(
            "a secret reference must be exactly one of `env: NAME`, `file: PATH` "
            "or `process: {command, args}`"
        ),
    ),
]
"""An action ``env`` value: a secret reference, or a string holding a ``${{ … }}`` template
(our extension, rendered per task; a plain string stays an invalid secret reference)."""
