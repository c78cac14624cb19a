"""``agentctl completion SHELL``: the printed script completes our commands in a real bash."""

from __future__ import annotations

import os
import select
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import Cli, cli_env


def _bash_complete(tmp_path: Path, script: str, *words: str) -> list[str]:
    """Source ``script`` in a fresh bash with ``agentctl`` on PATH and complete ``words``
    (the last one is the word being completed) through the function it registered."""
    bindir = tmp_path / "bin"
    bindir.mkdir(exist_ok=True)
    shim = bindir / "agentctl"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m agentctl "$@"\n')
    shim.chmod(0o755)
    (tmp_path / "completion.bash").write_text(script)
    quoted = " ".join(f"'{w}'" for w in ("agentctl", *words))
    program = (
        "source ./completion.bash\n"
        'func=$(complete -p agentctl | sed -E "s/.* -F ([^ ]+) .*/\\1/")\n'
        f"COMP_WORDS=({quoted}); COMP_CWORD={len(words)}\n"
        '"$func" agentctl\n'
        'printf "%s\\n" "${COMPREPLY[@]}"\n'
    )
    env = cli_env({"PATH": f"{bindir}:{cli_env()['PATH']}"})
    done = subprocess.run(
        ["bash", "-c", program], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")
def test_bash_script_completes_commands_subcommands_and_options(cli: Cli, tmp_path: Path) -> None:
    done = cli("completion", "bash")
    assert done.rc == 0, done.stderr
    script = done.stdout
    assert _bash_complete(tmp_path, script, "do") == ["doctor"]
    assert set(_bash_complete(tmp_path, script, "ru")) == {"run", "runs"}
    assert "reconcile" in _bash_complete(tmp_path, script, "effects", "")
    assert "--older-than-days" in _bash_complete(tmp_path, script, "gc", "--")


GLOBALS = {"--output", "--color", "--verbose", "--offline", "--locked", "--db", "--artifacts"}


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")
def test_bash_script_completes_the_global_options_and_their_values(
    cli: Cli, tmp_path: Path
) -> None:
    """They stand anywhere on a command line (cli_argv takes them out before typer parses),
    so they complete anywhere, with their values, and a command after them still does."""
    script = cli("completion", "bash").stdout
    assert GLOBALS | {"--version"} <= set(_bash_complete(tmp_path, script, "--"))
    after = set(_bash_complete(tmp_path, script, "runs", "list", "--"))
    assert GLOBALS | {"--state", "--limit"} <= after and "--version" not in after
    assert _bash_complete(tmp_path, script, "--output", "") == ["human", "json", "jsonl"]
    assert _bash_complete(tmp_path, script, "inspect", "--color", "a") == ["auto", "always"]
    assert _bash_complete(tmp_path, script, "--output", "=", "js") == ["json", "jsonl"]
    assert _bash_complete(tmp_path, script, "--output", "json", "--verbose", "ru") == [
        "run",
        "runs",
    ]
    assert _bash_complete(tmp_path, script, "--db", "s.db", "runs", "l") == ["list"]
    # A path's value is the shell's file names (the script's `-o default`), none of ours.
    assert _bash_complete(tmp_path, script, "runs", "list", "--db", "") == []
    assert _bash_complete(tmp_path, script, "run", "--", "--o") == []


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")
def test_bash_script_completes_the_values_of_options_with_fixed_choices(
    cli: Cli, tmp_path: Path
) -> None:
    script = cli("completion", "bash").stdout
    states = _bash_complete(tmp_path, script, "runs", "list", "--state", "")
    assert states == ["queued", "running", "paused", "succeeded", "failed", "cancelled"]
    assert _bash_complete(tmp_path, script, "runs", "list", "--state", "p") == ["paused"]
    reconcile = ("effects", "reconcile", "abcdef12", "--status")
    assert _bash_complete(tmp_path, script, *reconcile, "") == [
        "applied",
        "not-applied",
        "compensated",
    ]
    assert _bash_complete(tmp_path, script, "memory", "search", "--mode", "") == [
        "text",
        "vector",
        "hybrid",
    ]


def test_zsh_and_fish_get_the_global_options_values(tmp_path: Path) -> None:
    zsh = {"_AGENTCTL_COMPLETE": "complete_zsh", "_TYPER_COMPLETE_ARGS": "agentctl --output=j"}
    answer = "\n".join(_called_back(tmp_path, zsh))
    assert answer == """_arguments '*: :(("--output=json"\n"--output=jsonl"))'"""
    fish = {
        "_AGENTCTL_COMPLETE": "complete_fish",
        "_TYPER_COMPLETE_FISH_ACTION": "get-args",
        "_TYPER_COMPLETE_ARGS": "agentctl runs list --color ",
    }
    assert _called_back(tmp_path, fish) == ["auto", "always", "never"]


@pytest.mark.parametrize("shell", ["zsh", "fish"])
def test_other_shells_get_a_script_calling_agentctl_back(cli: Cli, shell: str) -> None:
    done = cli("--output", "json", "completion", shell)
    assert done.rc == 0, done.stderr
    assert done.data["shell"] == shell
    assert "_AGENTCTL_COMPLETE=complete_" + shell in done.data["script"]


def test_powershell_script_calls_agentctl_back_and_gets_its_answers(
    cli: Cli, tmp_path: Path
) -> None:
    # The original completes the shells clap_complete knows: bash, elvish, fish, powershell, zsh.
    done = cli("--output", "json", "completion", "powershell")
    assert done.rc == 0, done.stderr
    script = done.data["script"]
    assert "Register-ArgumentCompleter -Native -CommandName agentctl" in script
    assert '$Env:_AGENTCTL_COMPLETE = "complete_powershell"' in script
    # What the script's block sets before calling agentctl back, answered as `word:::help`.
    env = {
        "_AGENTCTL_COMPLETE": "complete_powershell",
        "_TYPER_COMPLETE_ARGS": "agentctl ru",
        "_TYPER_COMPLETE_WORD_TO_COMPLETE": "ru",
    }
    words = _called_back(tmp_path, env)
    assert {w.split(":::")[0] for w in words} == {"run", "runs"}


def _called_back(tmp_path: Path, extra: dict[str, str]) -> list[str]:
    """What ``agentctl`` prints when a completion script calls it back with ``extra`` set."""
    argv = [sys.executable, "-m", "agentctl"]
    done = subprocess.run(
        argv, cwd=tmp_path, env=cli_env(extra), capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def test_elvish_script_asks_in_bashs_form(cli: Cli, tmp_path: Path) -> None:
    done = cli("--output", "json", "completion", "elvish")
    assert done.rc == 0, done.stderr
    script = done.data["script"]
    assert "set edit:completion:arg-completer[agentctl]" in script
    assert "_AGENTCTL_COMPLETE=complete_bash" in script
    # The call its completer makes for `agentctl effects <TAB>`: the words joined by spaces.
    env = {
        "_AGENTCTL_COMPLETE": "complete_bash",
        "COMP_WORDS": "agentctl effects ",
        "COMP_CWORD": "2",
    }
    assert "reconcile" in _called_back(tmp_path, env)


@pytest.mark.skipif(shutil.which("elvish") is None, reason="elvish is not installed")
def test_elvish_script_completes_in_a_real_elvish(cli: Cli, tmp_path: Path) -> None:
    script = cli("completion", "elvish").stdout
    bindir = tmp_path / "bin"
    bindir.mkdir()
    shim = bindir / "agentctl"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m agentctl "$@"\n')
    shim.chmod(0o755)
    (tmp_path / "c.elv").write_text(script)
    out = tmp_path / "out.txt"
    (tmp_path / "t.elv").write_text(
        f"eval (slurp < {tmp_path / 'c.elv'})\n"
        f"put ($edit:completion:arg-completer[agentctl] agentctl effects '') | to-lines > {out}\n"
        "exit\n"
    )
    env = cli_env({"PATH": f"{bindir}:{cli_env()['PATH']}"})
    _interactive_elvish(tmp_path, env, f"eval (slurp < {tmp_path / 't.elv'})\n")
    assert "reconcile" in out.read_text().split()


def _interactive_elvish(cwd: Path, env: dict[str, str], line: str) -> None:
    """Type ``line`` into an interactive elvish (the `edit:` module exists only there)."""
    import pty

    leader, follower = pty.openpty()
    shell = subprocess.Popen(
        ["elvish", "-norc", "-i"],
        cwd=cwd,
        env=env,
        stdin=follower,
        stdout=follower,
        stderr=follower,
    )
    os.close(follower)
    try:
        os.write(leader, line.encode())
        deadline = time.monotonic() + 60
        while shell.poll() is None and time.monotonic() < deadline:
            if select.select([leader], [], [], 0.2)[0]:
                try:
                    os.read(leader, 65536)
                except OSError:
                    break
    finally:
        if shell.poll() is None:
            shell.kill()
        shell.wait()
        os.close(leader)


def test_unknown_shell_is_a_usage_error_naming_the_supported_ones(cli: Cli) -> None:
    done = cli("--output", "json", "completion", "tcsh")
    assert done.rc == 2
    message = done.error["error"]["message"]
    assert "tcsh" in message and "bash, elvish, fish, powershell, zsh" in message


@pytest.mark.parametrize("shell", ["bash", "elvish", "fish", "powershell", "zsh"])
def test_verbose_prints_the_script_alone(cli: Cli, shell: str) -> None:
    """For `completion` the human view is the script: `--verbose` (before or after the
    command) must not append the JSON record a shell would then run as commands."""
    plain = cli("completion", shell)
    assert plain.rc == 0, plain.stderr
    for args in (("--verbose", "completion", shell), ("completion", shell, "--verbose")):
        verbose = cli(*args)
        assert (verbose.rc, verbose.stdout, verbose.stderr) == (0, plain.stdout, ""), args
    # JSON mode keeps its envelope, --verbose or not.
    enveloped = cli("--verbose", "--output", "json", "completion", shell)
    assert enveloped.data["shell"] == shell
    assert enveloped.data["script"].rstrip("\n") == plain.stdout.rstrip("\n")


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")
def test_verbose_script_sources_cleanly_in_bash(tmp_path: Path) -> None:
    """`source <(agentctl --verbose completion bash)`, as a user puts it in ~/.bashrc: no
    error, and the completion function is registered."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    shim = bindir / "agentctl"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m agentctl "$@"\n')
    shim.chmod(0o755)
    program = "source <(agentctl --verbose completion bash) && complete -p agentctl"
    env = cli_env({"PATH": f"{bindir}:{cli_env()['PATH']}"})
    done = subprocess.run(
        ["bash", "-c", program], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60
    )
    assert (done.returncode, done.stderr) == (0, ""), done.stderr
    assert done.stdout.startswith("complete ") and done.stdout.rstrip().endswith(" agentctl")
