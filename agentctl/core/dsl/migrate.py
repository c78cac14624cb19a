"""``agentctl migrate``: a workflow document rewritten for ``apiVersion: agentctl.dev/v1``.

Job: move a document between the versions this build reads. ``v1alpha1`` and ``v1`` have the
same shape, so only the ``apiVersion`` value changes — edited in place in the source text, so
comments, key order, quoting and layout survive. A legacy ``playbook:`` document is
translated (``legacy.py``) and written out as new YAML (its comments cannot be kept).

Invariants:
- the source must load (``load_workflow``) and so must the result; a migration never produces
  a document ``check`` would reject;
- a document already at the target version comes back byte for byte, with no changes listed;
- a string of a translated document is written plain only where both YAML 1.1 (PyYAML's
  ``safe_dump`` rules) and our reader (``yamlscalars``) read the plain text back as that
  string: ``"0o17"`` or ``"+0o17"`` is quoted, never re-read as the number 15;
- pure: text in, text out.
"""

from __future__ import annotations

from dataclasses import dataclass

import yaml

from agentctl.core.dsl import load_workflow
from agentctl.core.dsl.legacy import is_legacy
from agentctl.core.dsl.yamlload import decode_source, parse_yaml
from agentctl.core.dsl.yamlscalars import add_implicit_resolvers

TARGET = "agentctl.dev/v1"
_OLD = "agentctl.dev/v1alpha1"


class _Dumper(yaml.SafeDumper):
    """``safe_dump``'s writer, also quoting a string our reader would type (module docstring)."""


# Added after SafeDumper's own resolvers: a plain text either set types is quoted.
add_implicit_resolvers(_Dumper)


@dataclass(frozen=True)
class Migration:
    """A document migrated to the current apiVersion: the new text and what changed."""

    text: str
    source_version: str  # the document's apiVersion, or "legacy" for a playbook document
    target_version: str
    changes: tuple[str, ...]


def migrate_source(source: str | bytes, file: str | None = None) -> Migration:
    """The migrated text of ``source``; ValidationError when either side does not load."""
    loaded = load_workflow(source, file=file)
    text = decode_source(source, file)
    if is_legacy(parse_yaml(text, file).value):
        document = {**loaded.raw, "apiVersion": TARGET}  # the translation, defaults left out
        migrated = yaml.dump(
            document, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=100
        )
        changes = ("translated the legacy playbook document", f"apiVersion set to {TARGET}")
        result = Migration(migrated, "legacy", TARGET, changes)
    elif loaded.document["apiVersion"] == _OLD:
        migrated = _replace_version(text, loaded.locate("apiVersion"))
        result = Migration(migrated, _OLD, TARGET, (f"apiVersion {_OLD} -> {TARGET}",))
    else:
        result = Migration(text, TARGET, TARGET, ())
    load_workflow(result.text, file=file)
    return result


def _replace_version(text: str, where: tuple[int, int] | None) -> str:
    """``text`` with the apiVersion value at ``where`` (1-based line, column) replaced."""
    line_no, column = where or (1, 1)
    lines = text.splitlines(keepends=True)
    line = lines[line_no - 1]
    at = line.find(_OLD, column - 1)
    lines[line_no - 1] = line[:at] + TARGET + line[at + len(_OLD) :]
    return "".join(lines)
