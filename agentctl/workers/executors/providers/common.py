"""What every real-provider executor shares: the call frame, the reply shape and error mapping.

The frame (``run_model_call``) validates the request, applies the egress policy (every denial
and DNS failure happens here, before any request), builds the egress-bound ``httpx2`` client
the adapter uses (itself, or through its SDK), runs the adapter's call and translates whatever
it raises.

Invariants:
- one call sends at most one HTTP request: SDK retries are off (each SDK-based adapter sets
  ``max_retries=0`` or its SDK's equivalent), an ``httpx2`` adapter sends once, and nothing
  here resends;
- the reply is the fake provider's shape ``{finish, text, toolCalls, usage}`` (+ ``fragments``
  when streaming), ``finish`` one of complete | tool_calls | max_tokens | refusal; its
  ``usage`` has one meaning for every provider (``USAGE_KEYS``), each adapter normalizing
  what its API reports;
- an HTTP 429 or 5xx answer is a retryable ``ProviderError``, another 4xx a non-retryable one;
  a failure after the first request byte left (timeout, cancellation, lost connection) is
  ``UncertainEffect`` — the call may have happened and is never resent; a failure before that
  is definitive;
- no credential or header value appears in any error message or output (they are redacted);
- an answer that came back but is no usable answer (``BilledFailure``: the model stopped for
  a reason a task cannot take) is a definitive failure that still reports the answer's usage,
  so the budget counts what the provider billed;
- every error names its provider (``provider NAME: …``), whoever raised it: the adapter, its
  SDK, or the egress transport (a redirect, an oversized answer);
- an SDK-based adapter imports its SDK when its module is imported (``import_sdk``), never
  inside the call: a call's ``timeoutSeconds`` bounds the call, not a cold SDK import.
"""

from __future__ import annotations

import contextlib
import importlib
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import httpx2
import trio

from agentctl.core.jsonvalue import JsonObject, JsonValue, as_object
from agentctl.core.redact import Redactor
from agentctl.errors import AgentctlError, ProviderError
from agentctl.mailbox.messages import Execute
from agentctl.mailbox.requests import ModelRequest
from agentctl.workers.egress import EgressPolicy
from agentctl.workers.egress_http import EgressRoute, check_route, egress_client
from agentctl.workers.executors import (
    ExecOutcome,
    FailedEffect,
    UncertainEffect,
    parse_request,
    watch_dispatch,
)
from agentctl.workers.foreign import foreign_text, one_line
from agentctl.workers.stream import Fragments

# The normalized usage every adapter reports, whatever its API counts (core/pricing.py):
# ``inputTokens`` all the input the call processed, cache reads and writes included;
# ``outputTokens`` all it generated, reasoning included; the cache counters are parts of the
# input, ``reasoningTokens`` a part of the output.
USAGE_KEYS = (
    "inputTokens",
    "outputTokens",
    "reasoningTokens",
    "cacheReadTokens",
    "cacheWriteTokens",
)
StatusOf = Callable[[BaseException], tuple[int, str] | None]


def import_sdk(*modules: str) -> None:
    """Import an adapter's SDK ``modules`` now, with the adapter's own module.

    The worker imports the adapter before it starts the call's timeout (its ``--preload``, or
    loading the executor for the first call: ``workers/serve.py``), so a cold SDK import —
    about a second for ``anthropic`` — is not charged to the call: a short ``timeoutSeconds``
    failed a call that never left ("timed out …, before its request was sent"). A missing
    optional extra is left for the call to report, as before.
    """
    for module in modules:
        with contextlib.suppress(ImportError):
            importlib.import_module(module)


class BilledFailure(Exception):
    """Internal to the adapters: the provider answered — and billed ``usage`` (normalized, as
    ``Reply.usage``) — but the answer is none a task can take. ``run_model_call`` reports it
    as a definitive failure carrying that usage."""

    def __init__(self, error: ProviderError, usage: dict[str, int]) -> None:
        super().__init__(error.message)
        self.error = error
        self.usage = usage


@dataclass
class Reply:
    """A normalized provider answer."""

    finish: str = "complete"
    text: str = ""
    tool_calls: list[JsonObject] = field(default_factory=list)
    usage: dict[str, int] = field(default_factory=dict)
    fragments: Fragments | None = None

    def to_output(self) -> JsonObject:
        usage: JsonObject = {key: int(self.usage.get(key, 0)) for key in USAGE_KEYS}
        output: JsonObject = {
            "finish": "tool_calls" if self.tool_calls else self.finish,
            "text": self.text,
            "toolCalls": list(self.tool_calls),
            "usage": usage,
        }
        if self.fragments is not None:
            output["fragments"] = list(self.fragments.items)
            output["droppedFragments"] = self.fragments.dropped
        return output

    def budget_usage(self) -> dict[str, int]:
        """What the budget ledger settles: one request and the tokens the answer reports."""
        spent = {key: int(self.usage.get(key, 0)) for key in USAGE_KEYS}
        spent["totalTokens"] = spent["inputTokens"] + spent["outputTokens"]
        return {"providerRequests": 1, **spent}


def parse_arguments(raw: str | None) -> JsonValue:
    """A tool call's arguments as JSON; text that is not JSON stays text (the schema check
    in the coordinator then fails the call with a readable message)."""
    if not raw:
        return {}
    try:
        value: JsonValue = json.loads(raw)
    except json.JSONDecodeError:
        return raw
    return value


def tool_output_text(content: JsonValue) -> str:
    """A tool result as the text the provider APIs take."""
    return content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)


def system_text(messages: list[JsonObject]) -> str:
    return "\n\n".join(str(m.get("content") or "") for m in messages if m.get("role") == "system")


Call = Callable[[ModelRequest, httpx2.AsyncClient], Awaitable[Reply]]


def redactor_of(req: ModelRequest) -> Redactor:
    """What a model call's errors are redacted of: its credential and header values."""
    return Redactor([req.credential, *req.headers.values()])


async def check_status(answer: httpx2.Response, provider: str, redactor: Redactor) -> None:
    """For adapters on ``httpx2`` directly: an HTTP error answer as our ``ProviderError`` —
    retryable for 429 and 5xx — with the API's own error message when it sent one. An
    answer may echo the key: it is redacted before it is cut, so a key the cut splits is
    never shown in part."""
    code = answer.status_code
    if code < 400:
        return
    await answer.aread()
    detail = redactor.redact_text(answer.text)[:500]
    try:
        body: JsonValue = json.loads(answer.text)
    except json.JSONDecodeError:
        body = None
    error = as_object(as_object(body).get("error"))
    if isinstance(error.get("message"), str):
        detail = redactor.redact_text(str(error["message"]))
    text = f"provider {provider}: HTTP {code}: {one_line(detail)}"
    raise ProviderError(text[:2000], retryable=code == 429 or code >= 500)


def not_json(provider: str) -> ProviderError:
    """The failure of a successful answer whose body is not JSON. Definitive and not retried:
    the model answered and nothing was lost in transport (so the call is not uncertain), and
    sending it again would run the model again."""
    return ProviderError(f"provider {provider}: the answer is not JSON")


def answer_json(answer: httpx2.Response, provider: str) -> JsonObject:
    """A successful answer's JSON object; anything else is a definitive provider failure."""
    try:
        body: JsonValue = json.loads(answer.content)
    except ValueError:
        raise not_json(provider) from None
    if not isinstance(body, dict):
        raise ProviderError(f"provider {provider}: the answer is not a JSON object")
    return body


async def run_model_call(
    msg: Execute, call: Call, status_of: StatusOf | None = None
) -> ExecOutcome:
    """Check egress, run ``call`` on an egress-bound client and translate its failures
    (``status_of`` reads the HTTP status out of an SDK's exception)."""
    req = parse_request(ModelRequest, msg)
    redactor = redactor_of(req)
    policy = EgressPolicy.from_json(req.egress.model_dump(by_alias=True))
    try:
        route = await check_route(req.endpoint, policy)
    except AgentctlError as exc:
        raise type(exc)(redactor.redact_text(exc.message), retryable=exc.retryable) from None
    watch_dispatch(lambda: route.tracker.sent, f"provider {req.provider}")
    client = egress_client(route, read_timeout=req.timeout_seconds)
    try:
        reply = await call(req, client)
    except BilledFailure as exc:
        text = redactor.redact_text(_named(exc.error.message, req.provider))
        error = ProviderError(text, retryable=exc.error.retryable)
        spent = ExecOutcome({}, usage=Reply(usage=exc.usage).budget_usage())
        raise FailedEffect(error, outcome=spent) from None
    except Exception as exc:
        raise translate(exc, route, redactor, req.provider, status_of) from None
    finally:
        with trio.CancelScope(shield=True):
            await client.aclose()
    return ExecOutcome(reply.to_output(), usage=reply.budget_usage())


def _own_error(exc: BaseException) -> AgentctlError | None:
    """Ours, raised inside the transport and wrapped by the SDK (policy, size cap)."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, AgentctlError):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


def _named(message: str, provider: str) -> str:
    """``message`` prefixed with its provider, unless its raiser already named it."""
    prefix = f"provider {provider}: "
    return message if message.startswith(prefix) else prefix + message


def translate(
    exc: Exception,
    route: EgressRoute,
    redactor: Redactor,
    provider: str,
    status_of: StatusOf | None,
) -> Exception:
    """Our error for an SDK failure: ``AgentctlError`` if definitive, else ``UncertainEffect``."""
    if isinstance(exc, UncertainEffect):
        exc.error.message = redactor.redact_text(_named(exc.error.message, provider))
        return exc
    own = _own_error(exc)
    if own is not None:
        text = redactor.redact_text(_named(own.message, provider))
        return type(own)(text, retryable=own.retryable)
    status = None if status_of is None else status_of(exc)
    if status is not None:
        code, detail = status
        retryable = code == 429 or code >= 500
        text = f"provider {provider}: HTTP {code}: {one_line(detail)}"
        return ProviderError(redactor.redact_text(text)[:2000], retryable=retryable)
    what = foreign_text(exc)
    if route.tracker.sent:
        text = f"provider {provider}: the request was sent, then {what}; it may have run"
        return UncertainEffect(ProviderError(redactor.redact_text(text)))
    text = f"provider {provider}: nothing was sent: {what}"
    return ProviderError(redactor.redact_text(text), retryable=True)
