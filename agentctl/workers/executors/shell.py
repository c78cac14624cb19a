"""``builtin.shell.exec`` (host process or container) and ``container.preflight``.

Invariants:
- argv only, no shell; the child environment is exactly ``request.env`` (host mode) or the
  engine client's own variables plus ``request.env`` forwarded by name (container mode);
- the command basename is checked against ``processAllowlist`` again when the request carries
  it (the coordinator's policy checked it first; this is defence in depth);
- outcomes: exit 0 ⇒ result; exit ≠ 0, output overflow, memory/CPU limit ⇒ definitive failure;
  timeout or cancellation after start ⇒ uncertain (the command may have had its effect);
- a process that exited non-zero still reports what it did: its output in the success shape
  with ``status: failed`` (exit code, redacted stdout/stderr) travels with the failure and is
  recorded; a process stopped by a limit reports none of its bytes (only the limit hit);
- a container that timed out or was cancelled is force-removed by name before we report.
Resolved env values are secrets: they are redacted from captured output (except the names in
``plain_env``, values rendered from templates, which are ordinary data).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import trio

from agentctl.core.jsonvalue import JsonObject
from agentctl.core.process_allowlist import process_denial
from agentctl.core.redact import Redactor
from agentctl.errors import PolicyDeniedError, RunFailedError
from agentctl.mailbox.messages import Execute
from agentctl.mailbox.requests import PreflightRequest, ShellRequest
from agentctl.sandbox.container import (
    EFFECT_LABEL,
    ENGINE_ENV_NAMES,
    RUN_LABEL,
    WORKSPACE_MOUNT,
    ContainerLimits,
    container_argv,
    container_name,
    engine_env,
    force_remove,
    preflight,
)
from agentctl.sandbox.paths import canonical_workspace
from agentctl.sandbox.process import ProcessResult, run_process
from agentctl.sandbox.program import process_cwd
from agentctl.workers.executors import (
    ExecOutcome,
    FailedEffect,
    UncertainEffect,
    closing_after_reply,
    parse_request,
)

_REMOVE_GRACE_S = 30.0


def check_allowlist(req: ShellRequest) -> None:
    if req.process_allowlist is None:
        return
    denial = process_denial(req.command, req.process_allowlist)
    if denial is not None:
        raise PolicyDeniedError(denial)


def _cwd(req: ShellRequest) -> str:
    return process_cwd(req.workspace, req.cwd)


async def _run(
    argv: list[str],
    env: dict[str, str],
    cwd: str | None,
    req: ShellRequest,
    *,
    watch: bool,
    stdin: bytes | None = None,
) -> ProcessResult:
    lim = req.limits
    return await run_process(
        argv,
        env=env,
        cwd=cwd,
        timeout_s=lim.timeout_seconds,
        stdout_limit=lim.stdout_limit_bytes,
        stderr_limit=lim.stderr_limit_bytes,
        combined_limit=lim.combined_output_limit_bytes,
        memory_limit_bytes=lim.memory_limit_bytes if watch else None,
        cpu_limit_s=lim.cpu_limit_seconds if watch else None,
        stdin=stdin,
        defer=closing_after_reply(),  # the child's descriptors are closed after the reply
    )


def _container_cwd(req: ShellRequest) -> str:
    """``cwd`` as the container sees it: checked as on the host (a directory inside the
    workspace, no ``..``), then found under the workspace's mount."""
    inside = os.path.relpath(_cwd(req), canonical_workspace(req.workspace))
    return WORKSPACE_MOUNT if inside == "." else f"{WORKSPACE_MOUNT}/{inside}"


async def _run_container(msg: Execute, req: ShellRequest, phase: Phase) -> ProcessResult:
    cfg = req.container
    if cfg is None:
        raise PolicyDeniedError("isolation: container needs a container configuration")
    clash = sorted(set(req.env) & set(ENGINE_ENV_NAMES))
    if clash:
        raise PolicyDeniedError(f"container env may not name engine variables: {clash}")
    engine = await preflight(cfg.runtime, cfg.image)
    name = container_name(msg.effect_id, phase.suffix)
    limits = ContainerLimits(cfg.memory_limit_bytes, cfg.cpu_limit_millis, cfg.pids_limit)
    argv = container_argv(
        engine.binary,
        engine.runtime,
        cfg.image,
        name,
        req.command,
        [*req.args, *phase.extra_args],
        sorted(req.env),
        canonical_workspace(req.workspace),
        limits,
        interactive=phase.stdin is not None,
        workdir=_container_cwd(req),
        labels={RUN_LABEL: msg.run_id, EFFECT_LABEL: msg.effect_id},
    )
    env = {**engine_env(os.environ), **req.env}
    finished = False
    try:
        result = await _run(argv, env, None, req, watch=False, stdin=phase.stdin)
        finished = result.outcome == "exited"
        return result
    finally:
        if not finished:
            with trio.CancelScope(shield=True), trio.move_on_after(_REMOVE_GRACE_S):
                await force_remove(engine, name)


def redact(data: bytes, secrets: list[str]) -> str:
    """``data`` as text with ``secrets`` redacted by the one redactor (``core.redact``): its
    rules, such as a whitespace-only value never redacted, hold for process output too."""
    return Redactor(secrets).redact_text(data.decode("utf-8", errors="replace"))


def redacted_tail(data: bytes, secrets: list[str], chars: int = 400) -> str:
    """The last ``chars`` characters of ``data`` as redacted text, for an error to quote.
    Redacted before it is cut: a secret the cut splits would otherwise show its unmatched
    end."""
    return redact(data, secrets)[-chars:].strip()


def redacted_head(data: bytes, secrets: list[str], chars: int) -> str:
    """The first ``chars`` characters of ``data`` as redacted text (see ``redacted_tail``)."""
    return redact(data, secrets)[:chars].strip()


def exited_report(
    result: ProcessResult, secrets: list[str], *, status: str, changed: bool
) -> ExecOutcome:
    """What a process that exited says it did — ``{status, changed, exitCode, stdout,
    stderr}``, the output redacted of ``secrets`` (already within the limits it ran under) —
    and the bytes it printed, as its usage."""
    output: JsonObject = {
        "status": status,
        "changed": changed,
        "exitCode": result.exit_code,
        "stdout": redact(result.stdout, secrets),
        "stderr": redact(result.stderr, secrets),
    }
    return ExecOutcome(
        output, usage={"processOutputBytes": len(result.stdout) + len(result.stderr)}
    )


def _outcome(req: ShellRequest, result: ProcessResult) -> ExecOutcome:
    if result.outcome == "timed_out":
        raise UncertainEffect(RunFailedError(f"process {result.detail}"))
    if result.outcome != "exited":
        raise RunFailedError(f"process killed: {result.detail}")
    secrets = [v for k, v in req.env.items() if v and k not in req.plain_env]
    ok = result.exit_code == 0
    # The process ran, so it may have changed the world whatever its exit code: a failed
    # step reads as "changed" too, never as "nothing happened" (docs/parity.md).
    done = exited_report(result, secrets, status="changed" if ok else "failed", changed=True)
    if not ok:
        tail = redacted_tail(result.stderr, secrets)
        where = f"; stderr ends: {tail}" if tail else ""
        error = RunFailedError(f"process exited with code {result.exit_code}{where}")
        raise FailedEffect(error, outcome=done)
    return done


@dataclass(frozen=True)
class Phase:
    """One run of a configured process: extra arguments, stdin bytes, container name suffix."""

    extra_args: tuple[str, ...] = ()
    stdin: bytes | None = None
    suffix: str = ""


async def run_configured(msg: Execute, req: ShellRequest, phase: Phase = Phase()) -> ProcessResult:
    """Run the request's process (host or container) once, under its limits and allowlist."""
    check_allowlist(req)
    if req.isolation == "container":
        return await _run_container(msg, req, phase)
    argv = [req.command, *req.args, *phase.extra_args]
    return await _run(argv, dict(req.env), _cwd(req), req, watch=True, stdin=phase.stdin)


async def execute_shell(msg: Execute) -> ExecOutcome:
    req = parse_request(ShellRequest, msg)
    return _outcome(req, await run_configured(msg, req))


async def execute_preflight(msg: Execute) -> ExecOutcome:
    req = parse_request(PreflightRequest, msg)
    engine = await preflight(req.runtime, req.image)
    output = {"engine": engine.kind, "binary": engine.binary, "runtime": engine.runtime}
    return ExecOutcome({**output, "image": req.image})
