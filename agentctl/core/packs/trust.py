"""Pack trust (``spec.packTrust``): which resolved packs a workflow may load.

This version verifies no publisher signatures (a ``signature`` is refused when the workflow is
loaded), so every pack's trust status is ``unsigned`` and ``packTrust.unsigned`` decides:
``deny`` refuses the workflow, ``warn`` (the default) loads it with a warning, ``allow`` loads
it silently. A pack that can start processes or containers (a ``builtin.shell.exec`` or
``extension.process`` action, or container isolation) is refused unless
``allowUnsignedProcess: true`` is written as well — a review acknowledgement, not proof of
who published it.

Invariants: pure; a refusal is a ``BlockedError`` (exit 3, a policy decision made before any
state exists) with a ``policy_denied`` diagnostic at the workflow entry that named the pack.
"""

from __future__ import annotations

from agentctl.core.dsl.packs import PackTrust
from agentctl.core.packs.resolve import ResolvedPack
from agentctl.errors import BlockedError, Diagnostic

UNSIGNED = "unsigned"


def _where(pack: ResolvedPack) -> str:
    return pack.roots[0] if pack.roots else "spec.packTrust"


def _denied(pack: ResolvedPack, message: str, help: str, file: str | None) -> BlockedError:
    diag = Diagnostic(
        code="policy_denied", message=message, file=file, path=_where(pack), help=help
    )
    return BlockedError(message, diagnostics=[diag])


def apply_trust(
    graph: list[ResolvedPack], trust: PackTrust | None, file: str | None
) -> list[Diagnostic]:
    """Refuse what ``trust`` forbids; the warnings for what it only tolerates."""
    policy = trust if trust is not None else PackTrust()
    warnings: list[Diagnostic] = []
    for pack in graph:
        if pack.process_capable and not policy.allow_unsigned_process:
            raise _denied(
                pack,
                f"pack {pack.name} {pack.version} can start processes and is unsigned",
                "review it, then set packTrust.allowUnsignedProcess: true",
                file,
            )
        if policy.unsigned == "deny":
            raise _denied(
                pack,
                f"pack {pack.name} {pack.version} is unsigned and packTrust.unsigned is deny",
                "this version verifies no signatures: set packTrust.unsigned to warn or allow",
                file,
            )
        if policy.unsigned == "warn":
            warnings.append(
                Diagnostic(
                    code="policy_denied",
                    severity="warning",
                    message=f"pack {pack.name} {pack.version} is unsigned; loaded by integrity",
                    file=file,
                    path=_where(pack),
                    help="set packTrust.unsigned: allow to accept unsigned packs silently",
                )
            )
    return warnings
