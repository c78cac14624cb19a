"""``model.azure_openai``: the Responses API of an Azure OpenAI resource, through the official
``openai`` SDK's ``AsyncAzureOpenAI`` client.

The provider names its resource ``endpoint`` explicitly (``https://NAME.openai.azure.com``)
and its ``apiVersion``; the key travels in the ``api-key`` header. Everything after the
client is the OpenAI adapter's (``openai_responses.respond``).

Invariants: as the OpenAI adapter — our egress-bound client, ``max_retries=0``, the SDK
imported only when a call runs.
"""

from __future__ import annotations

import httpx2

from agentctl.errors import ValidationError
from agentctl.mailbox.messages import Execute
from agentctl.mailbox.requests import ModelRequest
from agentctl.workers.executors import ExecOutcome
from agentctl.workers.executors.providers.common import Reply, run_model_call
from agentctl.workers.executors.providers.openai_responses import respond, status_of


async def execute_azure_openai(msg: Execute) -> ExecOutcome:
    return await run_model_call(msg, _call, status_of)


async def _call(req: ModelRequest, http: httpx2.AsyncClient) -> Reply:
    from openai import AsyncAzureOpenAI

    if not req.api_version:
        raise ValidationError(f"azure_openai provider {req.provider} needs an apiVersion")
    client = AsyncAzureOpenAI(
        api_key=req.credential,
        azure_endpoint=req.endpoint,
        api_version=req.api_version,
        http_client=http,
        max_retries=0,
        default_headers=req.headers,
        timeout=req.timeout_seconds,
    )
    return await respond(client, req)
