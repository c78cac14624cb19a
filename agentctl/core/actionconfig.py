"""Templates in an action's own configuration (our extension): ``args``, ``cwd``, ``env``.

Job: a foreach / matrix / loop child of a process action can differ from its siblings — each
``${{ … }}`` in the action's ``args`` items, its ``cwd`` and its ``env`` values that are strings
renders per task, against the same context as the task's ``with`` (inputs, memory, rendered vars,
needed task outputs). ``path`` and ``content`` of file actions are ``with`` keys, so action
``with`` defaults already render per task the same way.

Invariants:
- every rendered value is text and stays exactly one argv element or one variable value; it
  is never split or handed to a shell. An exact expression that yields a number, boolean or
  null becomes the text it has inside a longer string (a number as the original's JSON
  writes it); an object or array fails the task (``TemplateError``);
- a rendered ``cwd`` is judged as a literal one is, when the process starts
  (``sandbox.program.process_cwd``: inside the workspace, no ``..``);
- secret references in ``env`` (``{env|file|process: …}``) are never rendered: they resolve
  later, and only their source and SHA-256 are recorded;
- the recorded effect input is built from the rendered configuration, so the effect identity
  covers the values the process really received;
- pure: no clock, file or environment; the configuration is never mutated (a copy is returned).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from agentctl.core.conditions import ReadContext, TemplateError
from agentctl.core.jsonvalue import JsonObject, JsonValue
from agentctl.core.templates import render_text, scalar_text

_OPEN = "${{"


def templated_strings(config: Mapping[str, JsonValue]) -> Iterator[tuple[str, str]]:
    """``(sub-path, text)`` of each configuration string that renders per task."""
    args = config.get("args")
    if isinstance(args, list):
        for index, item in enumerate(args):
            if isinstance(item, str):
                yield f"args.{index}", item
    cwd = config.get("cwd")
    if isinstance(cwd, str):
        yield "cwd", cwd
    env = config.get("env")
    if isinstance(env, dict):
        for name, value in env.items():
            if isinstance(value, str):
                yield f"env.{name}", value


def is_templated(config: Mapping[str, JsonValue]) -> bool:
    return any(_OPEN in text for _, text in templated_strings(config))


def _text(where: str, text: str, ctx: ReadContext) -> str:
    # An exact expression's scalar reads as the interpolation inside a longer text writes it.
    rendered = scalar_text(render_text(text, ctx))
    if rendered is not None:
        return rendered
    raise TemplateError(f"`{where}` must render to text, not an object or array")


def render_config(config: Mapping[str, JsonValue], ctx: ReadContext) -> JsonObject:
    """A copy of ``config`` with its ``args`` items, ``cwd`` and string ``env`` values rendered."""
    rendered: JsonObject = dict(config)
    if not is_templated(config):
        return rendered
    args = config.get("args")
    if isinstance(args, list):
        rendered["args"] = [
            _text(f"args.{i}", item, ctx) if isinstance(item, str) else item
            for i, item in enumerate(args)
        ]
    cwd = config.get("cwd")
    if isinstance(cwd, str) and _OPEN in cwd:
        rendered["cwd"] = _text("cwd", cwd, ctx)
    env = config.get("env")
    if isinstance(env, dict):
        rendered["env"] = {
            name: _text(f"env.{name}", value, ctx) if isinstance(value, str) else value
            for name, value in env.items()
        }
    return rendered
