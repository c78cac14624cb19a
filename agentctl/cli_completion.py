"""Shell completion (``agentctl completion SHELL``) that knows the global options.

typer answers a shell from click's parameters, and the global options are none of them:
``cli_argv`` takes ``--output``, ``--color``, ``--verbose``, ``--offline``, ``--locked``,
``--artifacts`` and ``--db`` out of a command line, wherever they stand, before typer parses
the rest. So completion offered none of them, a word after one was read as a command
(``agentctl --output <TAB>`` listed the commands) and a command after one did not complete.

Invariants:
- the global options and their values are taken out of the words before click resolves
  them, as ``cli_argv`` takes them out of a command line (up to ``--``);
- a word starting with ``-`` gets click's options of the command plus the global ones;
- the value of ``--output`` or ``--color`` completes to its choices; that of ``--db`` or
  ``--artifacts`` to nothing, which each shell's script turns into file names;
- completing runs, reads and writes nothing.
"""

from __future__ import annotations

from typer._click.shell_completion import CompletionItem, ShellComplete, add_completion_class
from typer._completion_classes import (
    BashComplete,
    FishComplete,
    PowerShellComplete,
    ZshComplete,
    completion_init,
)

from agentctl.cli_argv import FLAG_OPTIONS, VALUE_CHOICES

PATH_OPTIONS = {
    "--db": "The ledger: a SQLite file or a postgresql:// URL.",
    "--artifacts": "The artifact directory of a PostgreSQL ledger.",
}
_VALUE_HELP = {"--output": "Output format.", "--color": "When to colour the output."}
_FLAG_HELP = {
    "--verbose": "Print more detail.",
    "--offline": "No network pack sources.",
    "--locked": "Require agentctl.pack.lock, reject drift.",
}


def _takes_value(word: str) -> bool:
    return word in VALUE_CHOICES or word in PATH_OPTIONS


def without_globals(args: list[str]) -> list[str]:
    """``args`` with every global option and its value taken out (before ``--``)."""
    kept: list[str] = []
    skip = False
    for i, word in enumerate(args):
        if skip:
            skip = False
        elif word == "--":
            return kept + args[i:]
        elif _takes_value(word.partition("=")[0]):
            skip = "=" not in word
        elif word not in FLAG_OPTIONS:
            kept.append(word)
    return kept


def _value_of(args: list[str], incomplete: str) -> tuple[str, str, str] | None:
    """(option, typed prefix, text to put before each answer) when ``incomplete`` is a
    global option's value: the word after it, or after its ``=`` (``--output=js``; bash
    splits that into ``--output``, ``=`` and ``js``)."""
    if "--" in args:
        return None
    name, eq, typed = incomplete.partition("=")
    if eq and _takes_value(name):
        return name, typed, name + "="
    last = args[-2:] if args[-1:] == ["="] else args[-1:]
    if last and _takes_value(last[0]):
        return last[0], "" if incomplete == "=" else incomplete, ""
    return None


def _global_names(args: list[str], incomplete: str) -> list[CompletionItem]:
    helps = {**_VALUE_HELP, **PATH_OPTIONS, **_FLAG_HELP}
    if not without_globals(args):  # no command yet: ``-V``/``--version`` acts here
        helps["--version"] = "Print the version."
    return [CompletionItem(n, help=h) for n, h in helps.items() if n.startswith(incomplete)]


class _KnowsGlobals(ShellComplete):
    """The completion of every shell, with the global options added (module invariants)."""

    def get_completions(self, args: list[str], incomplete: str) -> list[CompletionItem]:
        value = _value_of(args, incomplete)
        if value is not None:
            option, typed, before = value
            choices = VALUE_CHOICES.get(option, ())  # none for a path: the shell's file names
            return [CompletionItem(before + c) for c in choices if c.startswith(typed)]
        items = super().get_completions(without_globals(args), incomplete)
        if incomplete.startswith("-") and "--" not in args:
            known = {item.value for item in items}
            items += [i for i in _global_names(args, incomplete) if i.value not in known]
        return items


class _Bash(_KnowsGlobals, BashComplete):
    pass


class _Zsh(_KnowsGlobals, ZshComplete):
    pass


class _Fish(_KnowsGlobals, FishComplete):
    pass


class _PowerShell(_KnowsGlobals, PowerShellComplete):
    pass


def prepare_completion() -> None:
    """A shell is asking for completions: register the completion classes (typer's, then
    ours in their place)."""
    completion_init()
    for cls, name in ((_Bash, "bash"), (_Zsh, "zsh"), (_Fish, "fish")):
        add_completion_class(cls, name)
    for name in ("powershell", "pwsh"):
        add_completion_class(_PowerShell, name)
