"""Run inputs from the command line: ``spec.inputs`` with the ``--inputs`` / ``--inputs-file``
object and each ``--input KEY=VALUE`` laid over them.

Invariant: every name given is one the workflow declares or reads; the ``--inputs`` /
``--inputs-file`` object is strict JSON, an ``--input`` value is strict JSON or else text. Pure:
the caller reads the files and hands the texts in.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence

from agentctl.core.conditions import is_segment
from agentctl.core.jsonvalue import JsonObject, JsonValue
from agentctl.core.strictjson import parse_strict
from agentctl.errors import ValidationError


def resolve_inputs(
    defaults: Mapping[str, JsonValue],
    inputs_json: str | None,
    inputs_file_text: str | None,
    pairs: Sequence[str],
    read_names: Callable[[], Collection[str]] = frozenset,
    base: Mapping[str, JsonValue] | None = None,
    read_inside: Callable[[str], Sequence[str]] = lambda _: (),
) -> JsonObject:
    """spec.inputs ← --inputs / --inputs-file object ← each --input KEY=VALUE (JSON else text).

    ``base``: what the flags are laid over instead of ``defaults`` (retry and repair lay them
    over the source run's inputs); ``defaults`` still says which names are declared.

    The object is strict JSON (no NaN/Infinity, bounded nesting); an ``--input`` VALUE that is
    not strict JSON is its text. Every name given — a key of the
    ``--inputs`` / ``--inputs-file`` object or an ``--input`` — is an input the workflow declares
    (``spec.inputs``) or reads (``inputs.NAME`` in a template or condition rendered with the
    run's inputs, asked of ``read_names`` only for an undeclared name): a name neither declared
    nor read is a typo the workflow would otherwise silently ignore;
    ``read_inside(NAME)``: the sub-workflows whose own ``inputs.NAME`` the message points at.
    """
    merged = dict(defaults if base is None else base)
    what, given = _inputs_object(inputs_json, inputs_file_text)
    pairs_given = [_input_pair(pair, defaults) for pair in pairs]
    named = [(key, what) for key in given] + [(key, "--input") for key, _ in pairs_given]
    undeclared = [(key, flag) for key, flag in named if key not in defaults]
    if undeclared:  # one rule for every layer: the object's keys are checked as --input's
        read = read_names()
        for key, flag in undeclared:
            if key not in read:
                raise _unread(flag, key, defaults, read_inside(key))
    merged.update(given)
    merged.update(pairs_given)
    return merged


def _inputs_object(
    inputs_json: str | None, inputs_file_text: str | None
) -> tuple[str, dict[str, JsonValue]]:
    """The flag that gave the run-inputs object, and the object (empty when none was)."""
    if inputs_json is not None and inputs_file_text is not None:
        raise ValidationError("--inputs and --inputs-file are mutually exclusive")
    what = "--inputs" if inputs_json is not None else "--inputs-file"
    text = inputs_json if inputs_json is not None else inputs_file_text
    if text is None:
        return what, {}
    given = parse_strict(text, f"run inputs ({what})")
    if not isinstance(given, dict):
        raise ValidationError("run inputs must be a JSON object")
    return what, given


def _unread(
    flag: str, key: str, declared: Mapping[str, JsonValue], inside: Sequence[str]
) -> ValidationError:
    message = (
        f"{flag} {key!r} is neither a declared input (spec.inputs) nor read by the workflow "
        f"(${{{{ inputs.{key} }}}}); inputs: {_declared(declared)}"
    )
    if inside:  # the likely mix-up: a sub-workflow's own input, which a run never sets
        subs = ", ".join(f"`{name}`" for name in inside)
        message += (
            f"; inputs.{key} in spec.subworkflows ({subs}) is an input of the invocation, set "
            "by the `with` of the task that invokes it"
        )
    return ValidationError(message)


def _declared(declared: Mapping[str, JsonValue]) -> str:
    return ", ".join(sorted(declared)) or "none (the workflow declares no spec.inputs)"


def _input_pair(pair: str, declared: Mapping[str, JsonValue]) -> tuple[str, JsonValue]:
    """One ``--input KEY=VALUE``: an input's name, and VALUE as JSON, else as text."""
    key, eq, raw = pair.partition("=")
    if not eq or not key:
        raise ValidationError(f"--input expects KEY=VALUE, got {pair!r}")
    # A declared name is settable whatever its spelling; any other must be one a template can
    # read (`my-key`, `9lives`: spec/dsl.md §6.1), or no template could ever reach it.
    if key not in declared and not is_segment(key):
        raise ValidationError(
            f"--input {key!r} is not a valid input name (letters, digits, `_` and `-`, as a "
            f"template reads it); inputs: {_declared(declared)}"
        )
    try:
        return key, parse_strict(raw, f"--input {key}")
    except ValidationError:
        # Not strict JSON — `NaN`, `Infinity`, `1e400`, over-deep nesting included — is plain
        # text (spec/cli.md §1: "V as JSON else string"), as the original's JSON reader, which
        # refuses those too, leaves them: `--input label=NaN` is the string "NaN".
        return key, raw
