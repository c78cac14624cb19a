"""``builtin.read`` and ``builtin.write``: confined workspace file effects.

Invariants:
- every path goes through ``sandbox.paths`` and the executor acts on the canonical path it
  returns, never on the lexical one (a write's path may be absolute inside an absolute
  writable root; it is reported, and ingested, as written); the ledger's own files, named by
  the request's ``protected_paths``, are denied for reading and writing;
- a write over an existing file that is not UTF-8 text fails before anything is written: its
  ``before`` (the diff, what a compensation restores) could not be recorded as it is;
- a write is atomic: temp file in the target directory, fsync, rename, fsync of the directory;
  readers see the old or the new content, never a mix; identical content writes nothing;
- blocking I/O runs in a thread so other effects of this worker keep going;
- local I/O errors are retryable (spec/dsl.md §4.5); policy and size failures are not; a full
  disk (``TaskDiskFullError``) stops the run resumable instead of failing the task.
"""

from __future__ import annotations

import contextlib
import os
import tempfile

import trio

from agentctl.core.jsonvalue import JsonObject
from agentctl.core.textdiff import unified_diff
from agentctl.errors import AgentctlError, PolicyDeniedError, RunFailedError, from_task_os_error
from agentctl.filemode import plain_write_mode
from agentctl.mailbox.messages import Execute
from agentctl.mailbox.requests import ReadRequest, WriteRequest
from agentctl.sandbox.paths import (
    MAX_EXISTING_TARGET_BYTES,
    not_text_target,
    open_regular,
    resolve_read,
    resolve_write,
    too_large_target,
)
from agentctl.workers.executors import ExecOutcome, parse_request


def _io_error(action: str, rel: str, exc: OSError) -> AgentctlError:
    return from_task_os_error(exc, f"cannot {action} {rel!r}")


def _read_text(target: str, rel: str, max_bytes: int) -> str:
    try:
        with open_regular(target, rel, "read") as fh:
            data = fh.read(max_bytes + 1)
    except OSError as exc:
        raise _io_error("read", rel, exc) from exc
    if len(data) > max_bytes:
        raise RunFailedError(f"cannot read {rel!r}: larger than {max_bytes} bytes")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RunFailedError(f"cannot read {rel!r}: not valid UTF-8") from exc


async def execute_read(msg: Execute) -> ExecOutcome:
    req = parse_request(ReadRequest, msg)
    target = resolve_read(req.workspace, req.path, req.protected_paths)
    content = await trio.to_thread.run_sync(_read_text, target, req.path, req.max_bytes)
    return ExecOutcome({"status": "unchanged", "changed": False, "content": content})


def _current(target: str, rel: str) -> str | None:
    """The text a write would replace; an existing target is capped as a read is (spec: an
    existing write target is one of the files capped at 1 MiB): its whole old content would
    otherwise be read and recorded as the output's ``before``."""
    try:
        with open_regular(target, rel, "write") as fh:
            data = fh.read(MAX_EXISTING_TARGET_BYTES + 1)
    except FileNotFoundError:
        return None
    if len(data) > MAX_EXISTING_TARGET_BYTES:
        raise too_large_target(rel)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise not_text_target(rel) from exc


def _fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _atomic_write(target: str, data: bytes) -> None:
    parent = os.path.dirname(target)
    mode = plain_write_mode(target)  # a new file: 0666 less the user's umask, as any program
    fd, tmp = tempfile.mkstemp(dir=parent, prefix=".agentctl-", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fchmod(fh.fileno(), mode)
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _fsync_dir(parent)


def _make_parents(req: WriteRequest, target: str) -> str:
    """Create the target's parents, then confine again: a link may have appeared meanwhile."""
    os.makedirs(os.path.dirname(target), exist_ok=True)
    again = resolve_write(req.workspace, req.writable_roots, req.path, req.protected_paths)
    if again != target:
        raise PolicyDeniedError(f"path denied: {req.path!r} changed while it was being written")
    return again


def _write(req: WriteRequest, target: str) -> JsonObject:
    try:
        before = _current(target, req.path)
        if before == req.content:
            return _write_output(req, before, changed=False)
        target = _make_parents(req, target)
        _atomic_write(target, req.content.encode("utf-8"))
    except OSError as exc:
        raise _io_error("write", req.path, exc) from exc
    return _write_output(req, before, changed=True)


def _write_output(req: WriteRequest, before: str | None, *, changed: bool) -> JsonObject:
    diff = unified_diff(req.path, before, req.content) if req.diff else None
    return {
        "status": "changed" if changed else "unchanged",
        "changed": changed,
        "before": before,
        "after": req.content,
        "diff": diff,
        "path": req.path,
        "predictability": "partially_predictable",
    }


async def execute_write(msg: Execute) -> ExecOutcome:
    req = parse_request(WriteRequest, msg)
    target = resolve_write(req.workspace, req.writable_roots, req.path, req.protected_paths)
    output = await trio.to_thread.run_sync(_write, req, target)
    return ExecOutcome(output, artifacts=[req.path] if output["changed"] else [])
