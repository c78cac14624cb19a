"""``agentctl completion SHELL``: the printed script completes our commands in a real bash."""

from __future__ import annotations

import shutil
import subprocess
import sys
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


@pytest.mark.parametrize("shell", ["zsh", "fish"])
def test_other_shells_get_a_script_calling_agentctl_back(cli: Cli, shell: str) -> None:
    done = cli("--output", "json", "completion", shell)
    assert done.rc == 0, done.stderr
    assert done.data["shell"] == shell
    assert "_AGENTCTL_COMPLETE=complete_" + shell in done.data["script"]


def test_unknown_shell_is_a_usage_error_naming_the_supported_ones(cli: Cli) -> None:
    done = cli("--output", "json", "completion", "tcsh")
    assert done.rc == 2
    message = done.error["error"]["message"]
    assert "tcsh" in message and "bash, zsh, fish" in message
