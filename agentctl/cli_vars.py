"""Reading the source files a compile needs, before it starts (spec/dsl.md §5, §6.4).

Job: the command line's side of variables and instruction files. The compiler is pure, so
every var file a workflow declares (``varsFiles`` on the workflow, its agents and tasks,
paths relative to the workflow file), every agent's ``instructionsFile`` (the same base) and
every ``--vars-file F`` / ``--var K=JSON`` is read here, once, and handed to
``compile_workflow`` as ``CapturedVars``.

Invariants:
- a var file is UTF-8 YAML or JSON holding one mapping, at most 1 MiB, read through the strict
  workflow YAML loader; it may not hold ``varsFiles``, ``include`` or ``includes`` keys (var
  files never chain); an instruction file is UTF-8 text of at most 1 MiB; one capture reads
  at most 256 files and 16 MiB in all;
- a problem with a declared file is a ``ValidationError`` (exit 2) located at its
  ``varsFiles`` entry or ``instructionsFile``; nothing is read once compiling has started,
  and no state is created;
- a declared file is named relative to the workflow file's directory and stays inside the
  workspace (``--workspace``, by default that same directory), as the original's source reads
  do (its docs/VARIABLES.md: "reject `..` traversal, canonical paths outside the workspace,
  and symlink escapes"): a ``..`` segment, or a path that resolves (symlinks followed) outside
  the workspace, is a ``policy_denied`` diagnostic before the file is opened. The workspace
  decides only which files may be read, never what the plan holds: the same files give the
  same plan digest whatever workspace admitted them. ``--vars-file`` is the operator's own
  choice on the command line and is not confined;
- a pack's agents and sub-workflow tasks name their files relative to the pack manifest's
  directory, declared in its ``files``; merged, they read ``pack://P/path``
  (``core.packs.merge.pack_file_key``) and their bytes are the ones pack resolution verified
  against the declared digests (``LoadedWorkflow.pack_files``), never read from disk again:
  the same parsing and limits apply, and the 256-file / 16 MiB totals count them too;
- the CLI layer is every ``--vars-file`` object in order, then every ``--var``, last wins
  (``CapturedVars.from_cli_layers`` merges them and keeps each one's source).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from agentctl.cli_schemacache import prepare_workflow_model
from agentctl.clikit import MAX_CLI_FILE_BYTES, collect_from_now, read_cli_file
from agentctl.core.compiler import (
    CapturedVars,
    compile_workflow,
    condition_read_warnings,
    foreach_shadow_warnings,
    unused_invocation_input_warnings,
)
from agentctl.core.compiler.variables import CLI_VARS, VarLayer
from agentctl.core.dsl import load_workflow
from agentctl.core.dsl.diagnostics import Locator
from agentctl.core.dsl.yamlload import parse_yaml
from agentctl.core.jsonvalue import JsonObject
from agentctl.core.strictjson import RefusedJsonError, parse_strict
from agentctl.errors import Diagnostic, ValidationError

MAX_FILES = 256
MAX_TOTAL_BYTES = 16 * 1024 * 1024
FORBIDDEN_KEYS = ("varsFiles", "include", "includes")
_VARS_HELP = "var files are UTF-8 YAML or JSON mappings of at most 1 MiB"
_INSTRUCTIONS_HELP = "instruction files are UTF-8 text of at most 1 MiB"
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*\Z")


@dataclass
class _Capture:
    """What one capture has read so far (its limits span every file it reads)."""

    files: dict[str, JsonObject] = field(default_factory=dict)
    instructions: dict[str, str] = field(default_factory=dict)
    count: int = 0
    total: int = 0


def _located(
    exc: ValidationError,
    where: str | None,
    loaded: Any,
    help: str = _VARS_HELP,
    *,
    packed: bool = False,
) -> ValidationError:
    """``exc`` pointing at the ``varsFiles`` entry or ``instructionsFile`` that named the file;
    ``packed``: a pack's entry, merged into the document, so no line of the workflow's."""
    if where is None or exc.diagnostics:
        return exc
    line, column = (None, None) if packed else loaded.locate(where) or (None, None)
    found = Diagnostic(
        code="schema_violation",
        message=exc.message,
        file=loaded.file,
        line=line,
        column=column,
        path=where,
        help=help,
    )
    return ValidationError(exc.message, diagnostics=[found])


@dataclass(frozen=True)
class _Origin:
    """Where a workflow's declared files are named from (``base``, the workflow file's
    directory) and the workspace they must resolve inside (``root``); both resolved."""

    base: Path
    root: Path

    def confined(self, written: str, where: str, loaded: Any) -> Path:
        """``base / written`` if it stays in the workspace, else a located ``policy_denied``
        refusal: a document must not read files its workspace does not hold."""
        path = self.base / written
        if ".." in Path(written).parts:  # refused even when it would land inside: the guide's
            reason = f"{written!r} has a `..` segment"  # "reject `..` traversal"
        elif not path.resolve().is_relative_to(self.root):
            reason = f"{written!r} resolves to {path.resolve()}, outside the workspace {self.root}"
        else:
            return path
        line, column = loaded.locate(where) or (None, None)
        message = f"source file {reason}; declared files must lie in the workspace"
        found = Diagnostic(
            code="policy_denied",
            message=message,
            file=loaded.file,
            line=line,
            column=column,
            path=where,
            help="name a file inside the workspace (the workflow file's directory unless "
            "--workspace names another), relative to the workflow file, without `..`",
        )
        raise ValidationError(message, diagnostics=[found])


def _counted(path: Path, capture: _Capture, what: str) -> bytes:
    """The bytes of ``path``, counted against the capture's file and byte limits."""
    _count_file(capture)
    return _count_bytes(read_cli_file(path, what), capture)


def _count_file(capture: _Capture) -> None:
    capture.count += 1
    if capture.count > MAX_FILES:
        raise ValidationError(f"more than {MAX_FILES} var and instruction files in one run")


def _count_bytes(data: bytes, capture: _Capture) -> bytes:
    capture.total += len(data)
    if capture.total > MAX_TOTAL_BYTES:
        raise ValidationError(f"var and instruction files total more than {MAX_TOTAL_BYTES} bytes")
    return data


def _source(
    written: str, where: str, loaded: Any, origin: _Origin, capture: _Capture, what: str
) -> tuple[bytes, str]:
    """A declared file's bytes, counted, and the name its refusals give it. A pack's file
    (``pack://P/path``) is the asset resolution verified against the manifest's digest, never
    read again; any other is read relative to the workflow, inside the workspace."""
    packed = loaded.pack_files.get(written)
    if packed is None:
        path = origin.confined(written, where, loaded)
        return _counted(path, capture, what), str(path)
    _count_file(capture)
    if len(packed) > MAX_CLI_FILE_BYTES:  # an archive member is not bounded by its reader
        raise ValidationError(f"{what} {written} is larger than {MAX_CLI_FILE_BYTES} bytes")
    return _count_bytes(packed, capture), written


def _read(path: Path, capture: _Capture) -> JsonObject:
    return _parsed(_counted(path, capture, "var file"), str(path))


def _parsed(data: bytes, label: str) -> JsonObject:
    value = parse_yaml(data, file=label).value
    if not isinstance(value, dict):
        raise ValidationError(f"var file {label} must hold a mapping of variable names")
    chained = [key for key in FORBIDDEN_KEYS if key in value]
    if chained:
        raise ValidationError(
            f"var file {label} may not hold `{chained[0]}`: var files never chain"
        )
    return value


def _declared(loaded: Any, origin: _Origin, capture: _Capture) -> None:
    from agentctl.core.compiler.variables import declared_files

    for where, written in declared_files(loaded.document):
        if written in capture.files:
            continue
        try:
            data, label = _source(written, where, loaded, origin, capture, "var file")
            capture.files[written] = _parsed(data, label)
        except ValidationError as exc:
            raise _located(exc, where, loaded, packed=written in loaded.pack_files) from exc


def _instructions(loaded: Any, origin: _Origin, capture: _Capture) -> None:
    """The text of every agent's ``instructionsFile`` (UTF-8, relative to the workflow, or a
    pack's declared file)."""
    from agentctl.core.compiler.instructions import declared_instruction_files

    for where, written in declared_instruction_files(loaded.document):
        if written in capture.instructions:
            continue
        try:
            data, label = _source(written, where, loaded, origin, capture, "instruction file")
            capture.instructions[written] = _utf8(data, label)
        except ValidationError as exc:
            packed = written in loaded.pack_files
            raise _located(exc, where, loaded, _INSTRUCTIONS_HELP, packed=packed) from exc


def _utf8(data: bytes, path: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValidationError(
            f"instruction file {path} is not UTF-8 text (byte {exc.start})"
        ) from exc


def var_pair(text: str) -> tuple[str, Any]:
    """``K=JSON`` → (K, value); the value must be JSON (``--var n=3``, ``--var s='"x"'``)."""
    name, sep, raw = text.partition("=")
    if not sep or not _NAME.match(name):
        raise ValidationError(f"--var {text!r}: expected NAME=JSON (NAME a variable name)")
    try:  # strict, as every JSON the command line takes: no NaN, 1e999 or lone surrogate
        return name, parse_strict(raw, f"--var {name}")
    except RefusedJsonError:
        raise
    except ValidationError as exc:
        raise ValidationError(
            f"--var {name}: {raw!r} is not JSON (quote text: '\"text\"')"
        ) from exc


def capture_vars(
    loaded: Any,
    path: Path,
    vars_files: list[Path] | None,
    var_pairs: list[str] | None,
    *,
    workspace: Path | None = None,
) -> CapturedVars:
    """Read the var files ``loaded`` (the workflow at ``path``) declares, and the CLI layer.
    ``workspace``: what the declared files must lie in (None: the workflow's directory)."""
    capture = _Capture()
    base = path.resolve().parent
    origin = _Origin(base, workspace.resolve() if workspace is not None else base)
    _declared(loaded, origin, capture)
    _instructions(loaded, origin, capture)
    # One layer per --vars-file, then every --var as one: `explain` names each source.
    layers = [
        VarLayer("cliVarsFiles", str(file), _read(file, capture)) for file in vars_files or []
    ]
    if var_pairs:
        layers.append(VarLayer("cliVars", CLI_VARS, dict(var_pair(text) for text in var_pairs)))
    return CapturedVars.from_cli_layers(dict(capture.files), layers, capture.instructions)


@dataclass(frozen=True)
class CompiledSource:
    """What a command needs of a workflow file once it is compiled.

    The validated models and the parsed YAML of ``LoadedWorkflow`` are let go before the
    compiler runs: for a 10,000-task workflow they are ~28 MB the compile's peak need not hold.
    """

    document: dict[str, Any]
    file: str | None
    warnings: list[Diagnostic]
    locator: Locator
    variables: CapturedVars  # what the compile read: var files, instructions, CLI layers

    def locate(self, path: str) -> tuple[int, int] | None:
        return self.locator.locate(path)


def compile_with_vars(
    path: Path,
    vars_files: list[Path] | None = None,
    var_pairs: list[str] | None = None,
    *,
    workspace: Path | None = None,
    collect: bool = True,
) -> tuple[CompiledSource, Any]:
    """Load ``path``, resolve its packs, capture its var files and the CLI variables,
    compile; (source, plan). ``source.document`` is the document with its packs merged.

    ``workspace``: the command's ``--workspace`` (None: the workflow file's directory), which
    the workflow's declared var and instruction files must lie in (``capture_vars``).

    ``collect``: turn the collector on (``collect_from_now``) before loading; False leaves it
    as start-up left it, for a caller that turns it on itself once the compile is done."""
    if collect:
        collect_from_now()  # every command that compiles has done its imports by now
    prepare_workflow_model()
    loaded = load_workflow(read_cli_file(path, "workflow file", diagnosed=True), file=str(path))
    # Pack sources (archives, HTTP, the lock file) only when there are packs, or when
    # --offline/--locked made the CLI load them (a locked run checks the lock file either way).
    if loaded.workflow.spec.packs or "agentctl.packsource" in sys.modules:
        from agentctl.packsource import with_packs

        loaded = with_packs(loaded, path)
    with legacy_notes_on_refusal(loaded.warnings):
        captured = capture_vars(loaded, path, vars_files, var_pairs, workspace=workspace)
        source = CompiledSource(
            loaded.document, loaded.file, loaded.warnings, loaded.locator, captured
        )
        del loaded
        plan = compile_workflow(
            source.document, file=str(path), locate=source.locate, variables=captured
        )
    # The compile's own warnings (a document that compiles): after the loader's, as found.
    shadowed = foreach_shadow_warnings(
        source.document, captured, file=str(path), locate=source.locate
    )
    for warnings in (condition_read_warnings, unused_invocation_input_warnings):
        shadowed += warnings(source.document, file=str(path), locate=source.locate)
    if shadowed:
        source = replace(source, warnings=[*source.warnings, *shadowed])
    return source, plan


@contextmanager
def legacy_notes_on_refusal(warnings: Sequence[Diagnostic]) -> Iterator[None]:
    """A legacy document the compile refuses still shows the translation's dropped-key
    warnings after its errors (a dropped key may be why it is refused), as a refusal by the
    loader does; they are notes, not counted as problems."""
    try:
        yield
    except ValidationError as exc:
        notes = [w for w in warnings if w.code == "migration_required" and w.path]
        exc.diagnostics = [*exc.diagnostics, *notes]
        raise
