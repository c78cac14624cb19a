"""``providers inspect`` and ``auth check`` from the outside: offline, stateless, no values."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import EXAMPLES, Cli

WORKFLOW = """\
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: { name: auth }
spec:
  policy:
    environmentAllowlist: [ORG_ID]
    secretFileRoots: [secrets]
    secretProcessAllowlist: [helper.sh]
  providers:
    a: { kind: anthropic }
    g:
      kind: google
      credential: { file: secrets/gemini.key }
      headers:
        X-Org: { env: ORG_ID }
        X-Team: { env: TEAM_ID }
    o:
      kind: openai
      credential: { process: { command: ./helper.sh } }
  agents:
    w: { provider: a, model: m, instructions: hi }
  tasks:
    - { id: t, uses: "agent:w" }
"""
HELPER = "#!/bin/sh\ntouch ran.marker\necho sk-from-helper\n"


def _setup(tmp_path: Path) -> Path:
    (tmp_path / "secrets").mkdir()
    helper = tmp_path / "helper.sh"
    helper.write_text(HELPER)
    helper.chmod(0o755)
    wf = tmp_path / "wf.yaml"
    wf.write_text(WORKFLOW)
    return wf


def test_auth_check_reports_presence_without_reading_or_running_anything(
    cli: Cli, tmp_path: Path
) -> None:
    wf = _setup(tmp_path)
    env = {"ANTHROPIC_API_KEY": "sk-ant-VALUE-1", "ORG_ID": "org-VALUE-2", "TEAM_ID": "t"}
    done = cli("--output", "json", "auth", "check", str(wf), env=env)
    # The gemini key file is missing: the report says so, and is still exit 0 (as the
    # original's; run and doctor are the commands that exit 6).
    assert done.rc == 0, done.stderr
    by_name = {p["provider"]: p for p in done.data}
    assert by_name["a"]["credential"] == {
        "kind": "environment",
        "reference": "ANTHROPIC_API_KEY",  # a provider's default variable needs no allowlist
        "availability": "present",
    }
    assert by_name["g"]["credential"]["availability"] == "missing"
    assert by_name["g"]["headers"]["X-Org"]["availability"] == "present"
    assert by_name["g"]["headers"]["X-Team"]["availability"] == "missing_or_denied"
    assert by_name["o"]["credential"] == {
        "kind": "process",
        "reference": "./helper.sh",
        "availability": "unchecked",
    }
    assert not (tmp_path / "ran.marker").exists()  # the helper never ran
    assert "VALUE" not in done.stdout + done.stderr
    (tmp_path / "secrets" / "gemini.key").write_text("g-key\n")
    again = cli("--output", "json", "auth", "check", str(wf), env=env)
    assert {p["provider"]: p for p in again.data}["g"]["credential"]["availability"] == "present"
    assert again.rc == 0  # X-Team is still not allowlisted: reported, not an error
    human = cli("auth", "check", str(wf), env=env)
    assert human.rc == 0 and human.stdout.startswith("some credentials are missing")
    assert not (tmp_path / ".agentctl").exists()


def test_auth_check_passes_when_everything_is_present(cli: Cli, tmp_path: Path) -> None:
    wf = EXAMPLES / "providers" / "openai.yaml"
    done = cli("--output", "json", "auth", "check", str(wf), env={"OPENAI_API_KEY": "k"})
    assert done.rc == 0, done.stderr
    assert done.data[0]["credential"]["availability"] == "present"
    human = cli("auth", "check", str(wf), env={"OPENAI_API_KEY": "k"})
    assert human.rc == 0 and "present" in human.stdout


def test_providers_inspect_reports_capabilities_offline(cli: Cli, tmp_path: Path) -> None:
    wf = _setup(tmp_path)
    done = cli("--output", "json", "providers", "inspect", str(wf))
    assert done.rc == 0, done.stderr
    providers = {p["name"]: p for p in done.data["providers"]}
    anthropic, google = providers["a"], providers["g"]
    assert anthropic["endpoint"] == "https://api.anthropic.com/v1/messages"
    assert anthropic["credential"] == {"kind": "environment", "reference": "ANTHROPIC_API_KEY"}
    assert anthropic["usedBy"] == ["w"] and google["usedBy"] == []
    assert "streaming" not in anthropic["capabilities"] and anthropic["providerOptions"] == []
    assert google["headers"]["X-Org"] == {"kind": "environment", "reference": "ORG_ID"}
    assert "store" in providers["o"]["providerOptions"] and providers["o"]["runnable"]
    assert not (tmp_path / "ran.marker").exists()
    assert not (tmp_path / ".agentctl").exists()


def test_auth_check_of_a_workflow_without_secrets_says_there_is_nothing_to_check(
    cli: Cli,
) -> None:
    """No provider (hello) or only providers that need no credential (the fake one of e2): the
    human report says so instead of claiming every credential present over an empty table."""
    for name in ("hello.yaml", "e2-agent-router.yaml"):
        done = cli("--color", "never", "auth", "check", str(EXAMPLES / name))
        assert done.rc == 0, done.stderr
        assert done.stdout.startswith("no provider credential or header to check"), done.stdout
        assert "present" not in done.stdout and "┃" not in done.stdout, done.stdout


def test_providers_inspect_human_table_lists_each_providers_options(
    cli: Cli, tmp_path: Path
) -> None:
    # docs/providers.md and the command's help promise the options too, not only --output json.
    done = cli("providers", "inspect", str(EXAMPLES / "e8-retry-budget.yaml"))
    assert done.rc == 0, done.stderr
    assert "options" in done.stdout
    for option in ("toolInput", "finalText", "delayMs", "failFirst"):
        assert option in done.stdout, done.stdout
    # The wider table must not fold an endpoint across lines: it is copied as it is printed.
    openai = cli("providers", "inspect", str(EXAMPLES / "providers" / "openai.yaml"))
    assert openai.rc == 0, openai.stderr
    assert "http://127.0.0.1:8765/v1/responses" in openai.stdout
    assert "parallelToolCalls" in openai.stdout
