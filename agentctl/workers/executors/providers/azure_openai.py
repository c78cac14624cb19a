"""``azure_openai`` (model call): the Responses API of an Azure OpenAI resource.

The provider names its resource ``endpoint`` explicitly (``https://NAME.openai.azure.com``)
and its ``apiVersion``; the call goes to ``{endpoint}/openai/responses?api-version=…`` with
the key in the ``api-key`` header — the URL and header the official SDK's
``AsyncAzureOpenAI`` client uses for this API. Everything else is the OpenAI adapter's
(``openai_responses.respond``).

Invariants: as the OpenAI adapter — our egress-bound ``httpx2`` client, one request per call,
no SDK imported.
"""

from __future__ import annotations

import httpx2

from agentctl.errors import ValidationError
from agentctl.mailbox.messages import Execute
from agentctl.mailbox.requests import ModelRequest
from agentctl.workers.executors import ExecOutcome
from agentctl.workers.executors.providers.common import Reply, run_model_call
from agentctl.workers.executors.providers.openai_responses import Endpoint, respond


async def execute_azure_openai(msg: Execute) -> ExecOutcome:
    return await run_model_call(msg, _call)


async def _call(req: ModelRequest, http: httpx2.AsyncClient) -> Reply:
    if not req.api_version:
        raise ValidationError(f"azure_openai provider {req.provider} needs an apiVersion")
    url = f"{req.endpoint.rstrip('/')}/openai/responses"
    headers = {"api-key": req.credential, **req.headers}
    return await respond(http, Endpoint(url, headers, {"api-version": req.api_version}), req)
