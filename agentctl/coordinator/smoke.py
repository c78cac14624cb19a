"""``agentctl providers smoke-openai --live``: one bounded live request to the OpenAI
Responses API, outside any workflow, to tell whether a key, a model and the network work.

The request is the runtime's own model call (operation ``openai``; same request shape, same
egress-bound HTTP client, same error mapping), run on one worker process as every provider call
is; no database is opened and nothing is recorded.

Invariants:
- nothing leaves the machine unless the caller acknowledged it (``live``): without it the
  command is a usage error (exit 2), checked before the key is even looked at;
- the key comes from ``OPENAI_API_KEY`` (the openai provider's default credential); a missing
  or empty one is exit 6 before any worker starts, and the key never appears in the output or
  in an error (the worker redacts errors, ``_data`` the reply's text);
- exactly one HTTP request, never retried, with at most ``MAX_OUTPUT_TOKENS`` output tokens;
- egress is limited to the endpoint's own host and port; a private or loopback address is
  admitted only for an endpoint the operator named (``--endpoint``), never for the default.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from urllib.parse import urlsplit

from agentctl.coordinator.launch import run_trio
from agentctl.coordinator.workerpool import open_worker_pool
from agentctl.core import registry
from agentctl.core.jsonvalue import JsonObject, as_object
from agentctl.core.pricing import TOKEN_COUNTERS, token_spend
from agentctl.core.providerdefaults import CREDENTIAL_ENVS, DEFAULT_ENDPOINTS
from agentctl.core.redact import Redactor
from agentctl.errors import (
    CredentialMissingError,
    NetworkPolicyError,
    ProviderError,
    ValidationError,
)
from agentctl.mailbox.messages import Execute, Failure, Result
from agentctl.mailbox.requests import EgressSettings, ModelRequest

DEFAULT_MODEL = "gpt-5.6"  # the original's default for this command
KEY_ENV = CREDENTIAL_ENVS["openai"]
MAX_OUTPUT_TOKENS = 256  # room for a reasoning model to think briefly and still answer
TIMEOUT_SECONDS = 60.0
PROMPT = "Reply with the single word: ok"


@dataclass(frozen=True)
class SmokeRequest:
    """What the operator asked for: the acknowledgement, the model and where to send it."""

    live: bool
    model: str = DEFAULT_MODEL
    endpoint: str | None = None  # None: the openai provider's default endpoint


def smoke_openai(ask: SmokeRequest) -> JsonObject:
    """Send the one request; the ``LiveProviderSmoke`` data of its answer."""
    if not ask.live:
        raise ValidationError(
            "providers smoke-openai sends one live, billed request to OpenAI; "
            "pass --live to acknowledge it (nothing was sent)"
        )
    if not ask.model.strip():
        raise ValidationError("--model is empty; give an OpenAI model name")
    endpoint = _endpoint(ask.endpoint)
    key = os.environ.get(KEY_ENV, "")
    if not key.strip():
        raise CredentialMissingError(
            f"provider openai: environment variable {KEY_ENV} is not set (nothing was sent)"
        )
    message = _message(_request(ask, endpoint, key))
    started = time.monotonic()
    reply = run_trio(_send, message)
    elapsed_ms = round((time.monotonic() - started) * 1000)
    return _data(ask, endpoint, reply, elapsed_ms, Redactor([key]))


def _endpoint(given: str | None) -> str:
    """The Responses URL: the default, or the operator's (``http(s)://host[:port]/…/responses``)."""
    endpoint = (given if given is not None else DEFAULT_ENDPOINTS["openai"]).rstrip("/")
    parts = urlsplit(endpoint)
    if parts.scheme not in ("https", "http") or not parts.hostname:
        raise ValidationError(f"--endpoint {endpoint!r} is not an http(s) URL")
    if not parts.path.endswith("/responses"):
        raise ValidationError(f"--endpoint {endpoint!r}: an openai endpoint ends with /responses")
    return endpoint


def _egress(endpoint: str, named: bool) -> EgressSettings:
    parts = urlsplit(endpoint)
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError as exc:
        raise ValidationError(f"--endpoint {endpoint!r} has an invalid port") from exc
    return EgressSettings(
        network_allowlist=[str(parts.hostname)],
        allowed_schemes=["https" if parts.scheme == "https" else "http"],
        allowed_ports=[port],
        allow_private=named,
    )


def _request(ask: SmokeRequest, endpoint: str, key: str) -> ModelRequest:
    return ModelRequest(
        provider="openai",
        kind="openai",
        endpoint=endpoint,
        credential=key,
        model=ask.model,
        messages=[{"role": "user", "content": PROMPT}],
        max_output_tokens=MAX_OUTPUT_TOKENS,
        timeout_seconds=TIMEOUT_SECONDS,
        egress=_egress(endpoint, ask.endpoint is not None),
    )


def _message(request: ModelRequest) -> Execute:
    return Execute(
        effect_id="smoke-openai",  # no run, no ledger: the id only pairs request and reply
        run_id="smoke-openai",
        task_id="smoke",
        attempt=1,
        operation="openai",
        request=request.model_dump(by_alias=True),
        timeout_seconds=TIMEOUT_SECONDS,
        executor=registry.lookup("openai").executor,
    )


async def _send(message: Execute) -> Result | Failure:
    async with open_worker_pool(1) as pool:
        return await pool.execute(message)


def _data(
    ask: SmokeRequest, endpoint: str, reply: Result | Failure, ms: int, redactor: Redactor
) -> JsonObject:
    """The report of ``reply``; the reply's text carries no key either (as a run's model answer
    does not: the key redacted wherever it appears)."""
    if isinstance(reply, Failure):
        error = reply.error
        if error.type == NetworkPolicyError.__name__:
            raise NetworkPolicyError(_named(error.message))
        may = "; the request may have reached OpenAI" if reply.uncertain else ""
        raise ProviderError(f"{error.message}{may}")
    output = reply.output
    return {
        "provider": "openai",
        "model": ask.model,
        "endpoint": endpoint,
        "ok": True,
        "finish": output.get("finish"),
        "text": redactor.redact(output.get("text")),
        "usage": _usage(as_object(output.get("usage"))),
        "latencyMs": ms,
    }


def _named(message: str) -> str:
    """``message`` naming the provider once: the provider executor's refusals already start
    with ``provider openai:``, the egress layer's own ones do not."""
    prefix = "provider openai: "
    return message if message.startswith(prefix) else prefix + message


def _usage(usage: JsonObject) -> JsonObject:
    """The answer's token counters as a run settles them (``pricing.token_spend``: a negative
    or malformed counter counts 0), so the smoke reports no usage a run would not record."""
    spent = token_spend(usage)
    return {counter: spent[counter] for counter in TOKEN_COUNTERS}
