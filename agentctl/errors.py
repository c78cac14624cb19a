"""The one error hierarchy of agentctl; each error class maps to exactly one exit code.

This module is a leaf: it imports nothing of ours, so every layer (core included) may raise
these errors. Foreign exceptions are translated into these at exactly one boundary each
(sqlite3 in the ledger, httpx in the provider executors) with ``raise ... from exc``.
Errors cross process boundaries as data (``type``, ``message``, ``retryable``), never pickled.

    AgentctlError                     (4, the generic runtime failure)
    ├── ValidationError               2  usage, diagnostics, bad inputs, oversize files
    ├── BlockedError                  3  paused run, blocked plan, unresolved effect, TTY needed
    │   └── NetworkPolicyError        3  an egress denied by network policy (before any request),
    │                                        or a redirect refused (no redirects are followed)
    ├── RunFailedError                4  a run ended failed, or a task/policy denial at run time
    │   ├── PolicyDeniedError         4  an effect denied by policy (path escape, tool deny, ...)
    │   └── TaskDiskFullError         4  ENOSPC / EDQUOT on a task's own file: the run stops,
    │                                        resumable once space is freed
    ├── InvalidOperationError         4  resume of a terminal run, a reconciliation's runtime checks
    ├── PersistenceError              5  corrupt, foreign or incompatible state, artifact integrity,
    │   │                                  an OS error on state files (``from_os_error``)
    │   ├── DiskFullError             5  ENOSPC / EDQUOT / SQLITE_FULL while writing state
    │   ├── NotFoundError             5  run / effect / approval / artifact not found
    │   ├── FutureVersionError        5  a database or row format newer than supported
    │   ├── LockTimeoutError          5  the database stayed locked beyond the busy timeout
    │   └── OwnershipError            5  a run is owned by another live coordinator
    │       └── LeaseLostError        5  a serve's lease was taken over: it commits nothing
    ├── ProviderError                 6  provider, DNS or credential failure (429 / 5xx retryable)
    │   ├── CredentialMissingError    6
    │   ├── DnsError                  6  an egress host did not resolve (before any request)
    │   └── ResponseTooLargeError     6  an answer beyond policy.network.maxResponseBytes
    └── CancelledRunError           130  SIGINT / SIGTERM / agentctl cancel / --timeout-seconds
"""

from __future__ import annotations

import errno
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

Severity = Literal["error", "warning"]

DIAGNOSTIC_CODES = frozenset(
    {
        "yaml_syntax",
        "schema_violation",
        "unsupported_version",
        "migration_required",
        "duplicate_task",
        "missing_reference",
        "dependency_cycle",
        "invalid_template",
        "unsupported_capability",
        "invalid_secret_reference",
        "policy_denied",
        "incompatible_state",
    }
)


@dataclass(frozen=True)
class Diagnostic:
    """One finding about a user's document, located as precisely as we can."""

    code: str
    message: str
    severity: Severity = "error"
    file: str | None = None
    line: int | None = None
    column: int | None = None
    path: str | None = None
    help: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "severity": self.severity,
            "message": self.message,
            "file": self.file,
            "line": self.line,
            "column": self.column,
            "path": self.path,
            "help": self.help,
        }


class AgentctlError(Exception):
    """Base of every error a user may see; ``exit_code`` is what the CLI exits with."""

    exit_code: ClassVar[int] = 4

    def __init__(
        self,
        message: str,
        *,
        diagnostics: list[Diagnostic] | None = None,
        run_id: str | None = None,
        trace_id: str | None = None,
        retryable: bool = False,
        data: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.diagnostics: list[Diagnostic] = list(diagnostics or [])
        self.run_id = run_id
        self.trace_id = trace_id
        self.retryable = retryable
        self.data: dict[str, Any] = dict(data or {})

    def to_wire(self) -> dict[str, Any]:
        """The error as data, for crossing a process boundary."""
        return {"type": type(self).__name__, "message": self.message, "retryable": self.retryable}


class ValidationError(AgentctlError):
    exit_code = 2


class BlockedError(AgentctlError):
    exit_code = 3


class NetworkPolicyError(BlockedError):
    pass


class RunFailedError(AgentctlError):
    exit_code = 4


class PolicyDeniedError(RunFailedError):
    pass


class TaskDiskFullError(RunFailedError):
    pass


class InvalidOperationError(AgentctlError):
    exit_code = 4


class PersistenceError(AgentctlError):
    exit_code = 5


class DiskFullError(PersistenceError):
    pass


class NotFoundError(PersistenceError):
    pass


class RunNotFoundError(NotFoundError):
    """No run has the id (or unique id prefix) asked for: the database itself was found."""


class FutureVersionError(PersistenceError):
    pass


class LockTimeoutError(PersistenceError):
    pass


class ReconciliationConflictError(PersistenceError):
    """A reconciliation the store's rules refuse (spec/cli.md §4: "Rejections exit 4 (runtime
    checks) or 5 (store rules)"): the effect's status or its recorded history forbids it
    (contradictory), or the named compensation effect does not qualify. Refused like an
    approval that is no longer pending (§9, exit 5)."""


class OwnershipError(PersistenceError):
    pass


class LeaseLostError(OwnershipError):
    """A fenced write refused: another coordinator took over the run's lease (run queue)."""


class ProviderError(AgentctlError):
    exit_code = 6


class CredentialMissingError(ProviderError):
    pass


class DnsError(ProviderError):
    pass


class ResponseTooLargeError(ProviderError):
    pass


class CancelledRunError(AgentctlError):
    exit_code = 130


_OS_REASONS = {
    errno.EACCES: "permission denied",
    errno.EPERM: "operation not permitted",
    errno.EROFS: "the file system is read-only",
    errno.EISDIR: "it is a directory",
    errno.ENOTDIR: "a parent is not a directory",
    errno.ENOENT: "it does not exist",
    errno.EMFILE: "too many open files",
    errno.ENFILE: "too many open files in the system",
    errno.EIO: "input/output error",
}

DISK_FULL_HINT = "free some space, then run the command again (`agentctl resume RUN` for a run)"
TASK_DISK_FULL_HINT = "free space where the task writes, then `agentctl resume RUN`"


def from_os_error(exc: OSError, what: str) -> PersistenceError:
    """The one classification of an OS error met on state files (``what`` names the file).

    A full disk is an ordinary, recoverable failure: its own class and a hint, because the run
    stays resumable once space is freed.
    """
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return DiskFullError(
            f"no space left on the device holding {what}", data={"hint": DISK_FULL_HINT}
        )
    reason = _OS_REASONS.get(exc.errno or 0) or exc.strerror or str(exc)
    return PersistenceError(f"{what}: {reason}")


def from_task_os_error(exc: OSError, what: str) -> RunFailedError:
    """The one classification of an OS error met by a task's own file effect (``what`` says
    which action on which path): a failure of the task, retryable (spec/dsl.md §4.5).

    A full disk is its own class: nothing about the task is wrong, so the run stops where it
    is instead of failing, and ``resume`` runs the task again once space is freed.
    """
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return TaskDiskFullError(
            f"{what}: no space left on the device",
            retryable=True,
            data={"hint": TASK_DISK_FULL_HINT},
        )
    return RunFailedError(f"{what}: {exc.strerror or exc}", retryable=True)


def was_interrupted(exc: BaseException) -> bool:
    """Whether ``exc`` is or wraps a KeyboardInterrupt (a SIGINT): Python turns one raised
    while a class is built (a field's ``__set_name__``, e.g. in a lazily imported module) into
    a RuntimeError, and a nursery gathers its tasks' errors into a group."""
    seen: set[int] = set()
    stack: list[BaseException] = [exc]
    while stack:
        found = stack.pop()
        if id(found) in seen:
            continue
        seen.add(id(found))
        if isinstance(found, KeyboardInterrupt):
            return True
        if isinstance(found, BaseExceptionGroup):
            stack.extend(found.exceptions)
        stack.extend(e for e in (found.__cause__, found.__context__) if e is not None)
    return False
