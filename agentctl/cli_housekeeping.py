"""``agentctl gc``, ``completion SHELL`` and ``update``: a ledger small, a shell helpful, an
installation left alone.

Invariants:
- ``gc`` opens the database as other state commands do (a missing one is created, empty) and
  never touches a running or paused run; ``--dry-run`` reports exactly what a real collection
  would remove and changes nothing (``ledger/housekeeping.py`` holds the rules);
- ``completion`` prints a script for the original's shells — bash, elvish, fish, powershell,
  zsh; any other shell is exit 2 naming them. The script calls ``agentctl`` back with
  ``_AGENTCTL_COMPLETE`` set, and ``cli_completion.prepare_completion`` (called by ``cli``
  when it sees that variable) lets typer answer, with the global options added; elvish,
  which typer has no script for, asks in bash's form;
- ``update`` never modifies the installation and never contacts a network: it prints the
  installed version and how to upgrade from a reviewed release (spec/cli.md §1 ``UpdateInfo``).
"""

from __future__ import annotations

from typing import Annotated

import typer

from agentctl.cli_options import DbOpt
from agentctl.cli_state import _ledger, _now
from agentctl.clikit import DEFAULT_DB, deliver
from agentctl.core.jsonvalue import JsonValue
from agentctl.errors import ValidationError
from agentctl.render import Outcome

SHELLS = ("bash", "elvish", "fish", "powershell", "zsh")  # the original's list (clap_complete)
COMPLETE_VAR = "_AGENTCTL_COMPLETE"
# Elvish has no typer script: its completer calls agentctl back the way bash's script does
# (the words so far in COMP_WORDS, the index of the word being completed in COMP_CWORD).
ELVISH_SCRIPT = """\
use str
set edit:completion:arg-completer[agentctl] = {|@words|
  var n = (- (count $words) 1)
  env %(var)s=complete_bash COMP_WORDS=(str:join ' ' $words) COMP_CWORD=$n agentctl | from-lines
}
"""


def gc_cmd(
    older_than_days: Annotated[
        int,
        typer.Option("--older-than-days", min=0, max=36_500, help="Cutoff age (default 30)."),
    ] = 30,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Report, change nothing.")] = False,
    db: DbOpt = DEFAULT_DB,
) -> None:
    """Delete expired long-term memory and terminal runs last updated before the cutoff, with
    the value blobs and artifacts only they used. Running and paused runs are never touched."""
    from agentctl.ledger import GcRequest

    request = GcRequest(_now(), older_than_days=older_than_days, dry_run=dry_run)
    with _ledger(db) as ledger:
        data = ledger.collect_garbage(request).to_json()
    deliver(Outcome("GarbageCollection", data, human=lambda _s: _gc_text(data)))


def _gc_text(data: dict[str, JsonValue]) -> str:
    """The human report: each count ``data`` (the JSON) has, each removed run right under the
    count it belongs to. Untracked blob files and temporary leftovers are counted too: the
    JSON lists them and a real collection removes them, so the text must not hide them."""
    verb = "would remove" if data["dryRun"] else "removed"
    runs = data["runs"] if isinstance(data["runs"], list) else []
    store = data["artifacts"]
    return "\n".join(
        [
            f"{verb} {_count(len(runs), 'terminal run')} last updated before {data['before']}",
            *[f"  {r}" for r in runs],
            f"{verb} {_count(data['memoryEntries'], 'expired long-term memory entry')}",
            f"{verb} the pins of {_count(data['valueBlobsUnpinned'], 'stored value')} no row "
            "names any more",
            f"{verb} {_count(_listed(store, 'blobs'), 'unreferenced artifact blob')}, "
            f"{_count(_listed(store, 'untrackedFiles'), 'untracked file')} in the artifact store "
            f"and {_count(_listed(store, 'tmpFiles'), 'temporary leftover')}",
        ]
    )


def _count(n: object, noun: str) -> str:
    """``1 run``, ``2 runs``, ``3 entries``."""
    if n == 1:
        return f"1 {noun}"
    plural = noun[:-1] + "ies" if noun.endswith("y") else noun + "s"
    return f"{n} {plural}"


def _listed(report: JsonValue, key: str) -> int:
    """How many entries the artifact report's list ``key`` has (0 when there is none)."""
    entries = report.get(key) if isinstance(report, dict) else None
    return len(entries) if isinstance(entries, list) else 0


def completion_cmd(
    shell: Annotated[str, typer.Argument(help="bash, elvish, fish, powershell or zsh.")],
) -> None:
    """Print a completion script: `source <(agentctl completion bash)`."""
    # typer builds the script (it knows our command tree); its helper is not public API, so
    # tests/cli/test_completion.py drives the printed script in a real bash.
    from typer._completion_shared import get_completion_script

    if shell not in SHELLS:
        raise ValidationError(f"unsupported shell {shell!r}; supported shells: {', '.join(SHELLS)}")
    if shell == "elvish":
        script = ELVISH_SCRIPT % {"var": COMPLETE_VAR}
    else:
        script = get_completion_script(prog_name="agentctl", complete_var=COMPLETE_VAR, shell=shell)
    data = {"shell": shell, "script": script}
    deliver(Outcome("CompletionScript", data, human=lambda _s: script, document=True))


UPGRADE_COMMAND = "python -m pip install --upgrade agentctl"


def update_cmd() -> None:
    """Explain how to upgrade; the installation is never modified by agentctl itself."""
    from agentctl import __version__

    data = {"currentVersion": __version__, "automaticUpdate": False, "command": UPGRADE_COMMAND}
    deliver(
        Outcome(
            "UpdateInfo",
            data,
            human=lambda _s: (
                f"agentctl {__version__}: automatic update is disabled; upgrade from a reviewed "
                f"release with: {UPGRADE_COMMAND}"
            ),
        )
    )


def register(main_app: typer.Typer) -> None:
    main_app.command("gc")(gc_cmd)
    main_app.command("completion")(completion_cmd)
    main_app.command("update")(update_cmd)
