"""Provider commands: ``providers inspect FILE``, ``providers smoke-openai --live`` and
``auth check FILE`` (spec/cli.md §1).

Invariants: none of them creates state. Only ``smoke-openai`` calls a service — one bounded
request, and only with ``--live`` (``coordinator.smoke``). ``providers inspect`` reports
what each declared provider offers from the document alone, once the workflow compiles as
``check`` compiles it (``--workspace``, ``--var``, ``--vars-file``). ``auth check`` judges each
secret reference by presence only — it never reads a value and never runs a ``{process}``
helper — and exits 0 whatever it finds, as the original's: it is a report (each reference's
``availability`` says what is missing); ``run`` and ``doctor`` are the gates that exit 6.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from agentctl.cli_options import SourceWorkspaceOpt, VarOpt, VarsFileOpt
from agentctl.clikit import deliver, path_parser
from agentctl.render import Outcome, Settings, table

providers_app = typer.Typer(
    help="Inspect the providers a workflow declares, or run the opt-in OpenAI smoke.",
    no_args_is_help=True,
)
auth_app = typer.Typer(
    help="Check a workflow's secret references without revealing values.",
    no_args_is_help=True,
)
FileArg = Annotated[
    Path, typer.Argument(parser=path_parser("workflow file"), help="Workflow YAML file.")
]


@providers_app.command("inspect")
def providers_inspect_cmd(
    file: FileArg,
    workspace: SourceWorkspaceOpt = None,
    var_pairs: VarOpt = None,
    vars_files: VarsFileOpt = None,
) -> None:
    """Each provider's kind, endpoint, credential reference, capabilities and options."""
    from agentctl.cli_vars import compile_with_vars
    from agentctl.core.providerinfo import provider_capabilities

    # Compiled as ``check`` compiles it (same variables, same workspace), so a workflow that
    # needs a ``--var`` to compile, or reads var files elsewhere in its workspace, is inspectable.
    loaded, _plan = compile_with_vars(file, vars_files, var_pairs, workspace=workspace)
    data: Any = provider_capabilities(loaded.document["spec"])

    def human(settings: Settings) -> str:
        rows = [
            [
                str(p["name"]),
                str(p["kind"]),
                str(p["endpoint"] or "-"),
                _reference(p["credential"]),
                ", ".join(p["usedBy"]) or "-",
                ", ".join(p["capabilities"]),
                ", ".join(p["providerOptions"]) or "-",
            ]
            for p in data["providers"]
        ]
        cols = ["provider", "kind", "endpoint", "credential", "used by", "capabilities", "options"]
        return table("providers", cols, rows, settings, "the workflow declares no providers")

    deliver(Outcome("ProviderCapabilities", data, diagnostics=list(loaded.warnings), human=human))


@providers_app.command("smoke-openai")
def providers_smoke_openai_cmd(
    live: Annotated[
        bool,
        typer.Option("--live", help="Required: acknowledges one bounded, billed live request."),
    ] = False,
    model: Annotated[str, typer.Option("--model", help="The model to ask.")] = "gpt-5.6",
    endpoint: Annotated[
        str | None,
        typer.Option(
            "--endpoint",
            help="Responses URL (default https://api.openai.com/v1/responses); "
            "a private address is allowed only here.",
        ),
    ] = None,
) -> None:
    """One live Responses request with the key in OPENAI_API_KEY; reports the answer."""
    from agentctl.coordinator.smoke import SmokeRequest, smoke_openai

    data: Any = smoke_openai(SmokeRequest(live=live, model=model, endpoint=endpoint))

    def human(_settings: Settings) -> str:
        usage = data["usage"]
        return (
            f"openai {data['model']}: ok ({data['finish']}, {usage['inputTokens']} input / "
            f"{usage['outputTokens']} output tokens, {data['latencyMs']} ms)\n"
            f"reply: {data['text']}"
        )

    deliver(Outcome("LiveProviderSmoke", data, human=human))


@auth_app.command("check")
def auth_check_cmd(file: FileArg) -> None:
    """Whether each provider credential and header is available (presence only); a report."""
    from agentctl.cli_vars import compile_with_vars
    from agentctl.coordinator.credentials import provider_auth

    loaded, _plan = compile_with_vars(file)
    spec = loaded.document["spec"]
    found = provider_auth(spec.get("providers") or {}, spec.get("policy") or {}, _base(file))
    data = [auth.to_json() for auth in found]
    missing = any(auth.unavailable for auth in found)

    def human(settings: Settings) -> str:
        rows = []
        for auth in found:
            secrets = ([auth.credential] if auth.credential else []) + list(auth.headers)
            for s in secrets:
                place = s.place
                rows.append([auth.provider, place, f"{s.kind} {s.reference}", s.availability])
        if not rows:  # no provider, or none that takes a credential or header (fake)
            return "no provider credential or header to check\n"
        head = "some credentials are missing\n" if missing else "all credentials are present\n"
        return head + table(
            "auth", ["provider", "secret", "reference", "availability"], rows, settings
        )

    deliver(Outcome("AuthStatus", data, diagnostics=list(loaded.warnings), human=human))


def _base(file: Path) -> str:
    """Where ``{file}`` references resolve from: the workflow's directory (run's default)."""
    return str(file.resolve().parent)


def _reference(ref: Any) -> str:
    return f"{ref['kind']} {ref['reference']}" if isinstance(ref, dict) else "-"


def register(main_app: typer.Typer) -> None:
    main_app.add_typer(providers_app, name="providers")
    main_app.add_typer(auth_app, name="auth")
