"""The strict workflow language loader: YAML source → validated, normalized workflow document.

Public API: ``load_workflow(source, file=None) -> LoadedWorkflow``; it raises only
``agentctl.errors.ValidationError``, carrying every diagnostic found (code, message, file,
1-based line/column, dotted path, help).

The normalized document (``LoadedWorkflow.document``) is
``workflow.model_dump(mode="json", by_alias=True)``: camelCase keys exactly as spec/dsl.md
writes them, every spec default filled in. Keys the spec gives no default dump as ``None``
when absent (the compiler treats ``None`` as absent): e.g. a task's ``when``, ``foreach``,
``matrix``, ``loop``, ``route``, ``compensate``, ``outputSchema``, ``timeoutSeconds``; an
action's process-only keys on non-process kinds; budget limits. Secret references stay
``{"env": NAME}`` / ``{"file": PATH}`` / ``{"process": {...}}``.

A document the schema refuses still has the document rules run on its parts that are valid
on their own (``partial.py``): their findings follow the schema's diagnostics, so one pass
reports every independent problem of the stage.

Documents without ``apiVersion`` that use the old ``playbook:`` form are translated first
(``legacy.py``) and carry a ``migration_required`` warning, plus one per legacy key the
translation dropped (top-level, memory, provider and agent keys; at that key in the legacy
source, in source order).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from agentctl.core.collector import collector_paused
from agentctl.core.dsl.diagnostics import (
    Finding,
    Locator,
    describe,
    findings_from_pydantic,
    to_diagnostic,
)
from agentctl.core.dsl.legacy import is_legacy, legacy_locator, translate_legacy
from agentctl.core.dsl.partial import salvaged_findings
from agentctl.core.dsl.rules import document_findings
from agentctl.core.dsl.scalars import validate_as_written
from agentctl.core.dsl.secrets import (
    EnvSecret,
    FileSecret,
    ProcessCommand,
    ProcessSecret,
    SecretRef,
)
from agentctl.core.dsl.unused import unused_key_findings
from agentctl.core.dsl.workflow import API_VERSIONS, Workflow
from agentctl.core.dsl.yamlload import MAX_SOURCE_BYTES, parse_yaml
from agentctl.errors import Diagnostic, ValidationError

__all__ = [
    "API_VERSIONS",
    "MAX_SOURCE_BYTES",
    "EnvSecret",
    "FileSecret",
    "LoadedWorkflow",
    "ProcessCommand",
    "ProcessSecret",
    "SecretRef",
    "Workflow",
    "load_workflow",
]


@dataclass(frozen=True)
class LoadedWorkflow:
    """A validated workflow with its normalized document and source positions."""

    workflow: Workflow
    document: dict[str, Any]
    raw: dict[str, Any]
    file: str | None
    warnings: list[Diagnostic] = field(default_factory=list)
    locator: Locator = field(default_factory=Locator, repr=False)
    # Once its packs are merged (``agentctl.packsource``): the verified bytes of each pack file
    # the document's ``instructionsFile``/``varsFiles`` name, by ``pack://P/path`` key.
    pack_files: Mapping[str, bytes] = field(default_factory=dict, repr=False)

    def locate(self, path: str) -> tuple[int, int] | None:
        """(line, column) of the deepest known prefix of the dotted ``path``."""
        return self.locator.locate(path)


@collector_paused()
def load_workflow(source: str | bytes, file: str | None = None) -> LoadedWorkflow:
    """Parse and validate a workflow document; raises ValidationError with all diagnostics."""
    parsed = parse_yaml(source, file)
    locator = Locator.later(parsed.tables_later())
    raw = parsed.value
    if not isinstance(raw, dict):
        message = f"a workflow document must be a mapping, got {describe(raw)}"
        finding = Finding("schema_violation", "", message)
        raise _invalid([to_diagnostic(finding, locator, file)])
    warnings: list[Diagnostic] = []
    notes: list[Diagnostic] = []  # the translation's dropped keys: they may explain an error
    texts = parsed.plain_texts
    if is_legacy(raw):
        texts = {}  # the translation moves paths; legacy documents keep the strict typing
        translation = translate_legacy(raw)
        raw, locator = translation.document, legacy_locator(locator)
        if translation.rejected:
            raise _invalid([to_diagnostic(f, locator, file) for f in translation.rejected])
        notes = sorted((_as_warning(f, locator, file) for f in translation.dropped), key=_position)
        warnings += [_migration_warning(file), *notes]
    workflow, raw, findings = _validate(raw, texts)
    if workflow is None:  # the rules' findings on the valid parts follow the schema's
        salvaged = [to_diagnostic(f, locator, file) for f in salvaged_findings(raw, findings)]
        raise _invalid([to_diagnostic(f, locator, file) for f in findings], salvaged, notes)
    diagnostics = [to_diagnostic(f, locator, file) for f in findings]
    if diagnostics:
        raise _invalid(diagnostics, notes=notes)
    unused = unused_key_findings(raw)
    warnings += [_as_warning(f, locator, file) for f in unused]
    document = workflow.model_dump(mode="json", by_alias=True)
    return LoadedWorkflow(workflow, document, raw, file, warnings, locator)


def _validate(
    raw: dict[str, Any], texts: dict[str, str]
) -> tuple[Workflow | None, dict[str, Any], list[Finding]]:
    # Field names (``max_concurrency``, ``with_``) are for Python callers only; a document
    # must spell every key exactly as the spec does (validate_as_written passes by_name=False).
    found = validate_as_written(Workflow, raw, texts)
    if found.model is None:
        assert found.error is not None
        findings = findings_from_pydantic(found.error, found.raw, Workflow)
        return None, found.raw, [_version_help(f) for f in findings]
    return found.model, found.raw, document_findings(found.model)


def _as_warning(finding: Finding, locator: Locator, file: str | None) -> Diagnostic:
    return replace(to_diagnostic(finding, locator, file), severity="warning")


def _position(diagnostic: Diagnostic) -> tuple[int, int]:
    return diagnostic.line or 0, diagnostic.column or 0


def _migration_warning(file: str | None) -> Diagnostic:
    return Diagnostic(
        code="migration_required",
        severity="warning",
        # Read in memory as the shape both current versions share; `migrate` writes the
        # newer apiVersion (core/dsl/migrate.py), so the message names no version it won't write.
        message="legacy `playbook:` document translated to the current workflow format",
        file=file,
        line=1,
        column=1,
        help="run `agentctl migrate FILE --write OUT` to write it as an agentctl.dev/v1 document",
    )


def _version_help(finding: Finding) -> Finding:
    if finding.path == "apiVersion" and finding.help == "add `apiVersion`":
        return Finding(
            finding.code,
            finding.path,
            finding.message,
            f"start the document with apiVersion: {API_VERSIONS[0]}",
            finding.point,
        )
    return finding


def _invalid(
    diagnostics: list[Diagnostic],
    later: list[Diagnostic] | None = None,
    notes: list[Diagnostic] | None = None,
) -> ValidationError:
    """The error carrying ``diagnostics`` in document order, then ``later`` (the document
    rules' findings on the valid parts of a document the schema refused) in document order:
    the first diagnostic stays the schema's first, as before any were salvaged. ``notes``
    (warnings, e.g. a legacy provider's dropped ``endpoint`` behind "needs an explicit
    endpoint") come last and are not counted as problems."""
    ordered = sorted(diagnostics, key=_position) + sorted(later or [], key=_position)
    count = len(ordered)
    first = ordered[0].message if ordered else "invalid workflow"
    ordered += notes or []
    plural = "problem" if count == 1 else "problems"
    return ValidationError(f"invalid workflow ({count} {plural}): {first}", diagnostics=ordered)
