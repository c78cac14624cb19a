"""Container command construction, engine/image preflight and forced removal.

Invariants (spec/cli.md §10, docs/containers.md):
- images are never pulled (``--pull=never``) and must already be present by digest;
- the container has no network, a read-only root and a read-only ``/workspace`` bind, runs as
  65532:65532 with every capability dropped and ``no-new-privileges``, under memory, CPU,
  pids, nofile and nproc limits, with a small noexec ``/tmp``;
- environment variables cross by name only (``-e NAME``), so values never appear in argv;
- preflight fails closed: no answering engine or no local image ⇒ ``PolicyDeniedError``;
  there is never a fallback to host execution;
- every container is labelled with its run and effect (``RUN_LABEL``, ``EFFECT_LABEL``), so a
  later invocation can find and remove what a crashed one left running (``remove_labelled``).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from agentctl.errors import PolicyDeniedError, RunFailedError
from agentctl.sandbox.process import ProcessResult, run_process

EngineKind = Literal["docker", "podman"]
CONTAINER_USER = "65532:65532"
WORKSPACE_MOUNT = "/workspace"  # where the workspace is mounted, read-only, in the container
RUNC_PATH = "/usr/sbin/runc"
RUN_LABEL = "agentctl.run"
EFFECT_LABEL = "agentctl.effect"
# Variables the engine client itself needs; the workload gets only its declared names.
ENGINE_ENV_NAMES = (
    "PATH",
    "HOME",
    "XDG_RUNTIME_DIR",
    "CONTAINERS_CONF",
    "CONTAINERS_STORAGE_CONF",
    "DOCKER_HOST",
    "DOCKER_CONFIG",
    "TMPDIR",
)
_PROBE_TIMEOUT_S = 30.0
_PROBE_LIMIT = 64 * 1024


@dataclass(frozen=True)
class Engine:
    """The container engine found: its kind, client binary and OCI runtime."""

    kind: EngineKind
    binary: str  # absolute path of the client
    runtime: str | None  # OCI runtime passed as --runtime, if any


@dataclass(frozen=True)
class ContainerLimits:
    """The memory, CPU and process limits a container runs under."""

    memory_bytes: int = 256 * 1024 * 1024
    cpu_millis: int = 1000
    pids: int = 64


def oci_runtime_for(kind: EngineKind, environ: Mapping[str, str]) -> str | None:
    """``AGENTCTL_OCI_RUNTIME`` if set; podman defaults to runc when it is installed."""
    configured = environ.get("AGENTCTL_OCI_RUNTIME", "").strip()
    if configured:
        return configured
    if kind == "podman" and os.path.exists(RUNC_PATH):
        return "runc"
    return None


def container_argv(
    engine: str,
    runtime: str | None,
    image: str,
    name: str,
    command: str,
    args: Sequence[str],
    env_names: Sequence[str],
    workspace: str,
    limits: ContainerLimits,
    *,
    interactive: bool = False,
    workdir: str = WORKSPACE_MOUNT,
    labels: Mapping[str, str] | None = None,
) -> list[str]:
    """The full engine command line running ``command args`` in ``image``.

    ``interactive`` keeps the container's stdin open (``-i``) for a payload written to it;
    ``workdir`` is where it starts: the workspace's mount or a directory under it;
    ``labels`` are attached as ``--label KEY=VALUE`` (the run and effect it serves).
    """
    is_docker = os.path.basename(engine).startswith("docker")
    # podman takes --runtime as a global option; docker only as an option of `run`.
    argv = [engine] + (["--runtime", runtime] if runtime and not is_docker else []) + ["run"]
    argv += ["--runtime", runtime] if runtime and is_docker else []
    argv += ["--rm", "--pull=never", "--name", name, "--network=none", "--read-only"]
    argv += ["--user", CONTAINER_USER, "--cap-drop=ALL", "--security-opt", "no-new-privileges"]
    argv += _confinement(workspace, limits, workdir)
    for key, value in sorted((labels or {}).items()):
        argv += ["--label", f"{key}={value}"]
    for env_name in env_names:
        argv += ["-e", env_name]
    argv += ["-i"] if interactive else []
    argv += ["--entrypoint", command, image, *args]
    return argv


def _confinement(workspace: str, limits: ContainerLimits, workdir: str) -> list[str]:
    """Resource limits, a read-only workspace mount and a small no-exec /tmp."""
    return [
        f"--memory={limits.memory_bytes}b",
        f"--cpus={limits.cpu_millis / 1000:g}",
        f"--pids-limit={limits.pids}",
        "--tmpfs",
        "/tmp:rw,size=16m,noexec,nosuid,nodev",
        "-v",
        f"{workspace}:{WORKSPACE_MOUNT}:ro",
        "--workdir",
        workdir,
        "--ulimit",
        "nofile=1024:1024",
        "--ulimit",
        "nproc=256:256",
    ]


def engine_env(environ: Mapping[str, str]) -> dict[str, str]:
    return {k: environ[k] for k in ENGINE_ENV_NAMES if k in environ}


async def _probe(argv: list[str], environ: Mapping[str, str]) -> bool:
    return (await _query(argv, environ)).ok


def _candidates(preference: str) -> list[EngineKind]:
    if preference == "docker":
        return ["docker"]
    if preference == "podman":
        return ["podman"]
    return ["podman", "docker"]


async def preflight(
    engine_pref: str, image: str, environ: Mapping[str, str] | None = None
) -> Engine:
    """The first engine of ``engine_pref`` that answers and holds ``image`` locally."""
    env = dict(os.environ if environ is None else environ)
    tried: list[str] = []
    for kind in _candidates(engine_pref):
        binary = shutil.which(kind, path=env.get("PATH"))
        if binary is None:
            tried.append(f"{kind}: not installed")
            continue
        runtime = oci_runtime_for(kind, env)
        prefix = _prefix(Engine(kind, binary, runtime))
        if not await _probe([*prefix, "version"], env):
            tried.append(f"{kind}: engine not answering")
            continue
        if not await _probe([*prefix, "image", "inspect", image], env):
            tried.append(f"{kind}: image {image!r} not present locally (images are never pulled)")
            continue
        return Engine(kind, binary, runtime)
    raise PolicyDeniedError("container isolation unavailable: " + "; ".join(tried))


async def force_remove(engine: Engine, name: str, environ: Mapping[str, str] | None = None) -> bool:
    """Remove the named container whatever its state; True if the engine reported success."""
    env = dict(os.environ if environ is None else environ)
    # podman would otherwise wait its stop timeout (SIGTERM first) before killing.
    extra = ["--time=0"] if engine.kind == "podman" else []
    return await _probe([*_prefix(engine), "rm", "-f", *extra, name], env)


def container_name(effect_id: str, suffix: str = "") -> str:
    """The name of the container running (a phase of) effect ``effect_id``."""
    return f"agentctl-{effect_id[:40]}{suffix}"


async def remove_labelled(
    preferences: Iterable[str], label: str, environ: Mapping[str, str] | None = None
) -> list[str]:
    """Force-remove every container labelled ``label`` (``KEY=VALUE``) in each engine that
    ``preferences`` (``auto``/``podman``/``docker``) may name; returns the ids removed.

    Used once nothing may be running them any more (their run's driver died): a container
    outlives the engine client killed with its worker, and would go on acting after its
    effect was judged. An engine not installed or not answering is skipped (it runs none we
    could reach); one that lists containers but fails to remove them raises
    ``RunFailedError``: the caller must not judge what may still be running."""
    env = dict(os.environ if environ is None else environ)
    kinds = dict.fromkeys(kind for pref in sorted(preferences) for kind in _candidates(pref))
    removed: list[str] = []
    for kind in kinds:
        binary = shutil.which(kind, path=env.get("PATH"))
        if binary is None:
            continue
        prefix = _prefix(Engine(kind, binary, oci_runtime_for(kind, env)))
        ids = await _labelled(prefix, label, env)
        if not ids:
            continue
        extra = ["--time=0"] if kind == "podman" else []
        gone = await _query([*prefix, "rm", "-f", *extra, *ids], env)
        # One that went away meanwhile (its worker's own clean-up) is not a failure.
        left = [] if gone.ok else sorted(set(ids) & set(await _labelled(prefix, label, env)))
        if left:
            why = gone.detail or gone.stderr.decode("utf-8", "replace").strip()[-400:]
            raise RunFailedError(f"{kind}: could not remove container(s) {left} ({why})")
        removed += ids
    return removed


async def _labelled(prefix: list[str], label: str, env: Mapping[str, str]) -> list[str]:
    """The ids of the containers labelled ``label``; none when the engine does not answer."""
    listing = await _query([*prefix, "ps", "-a", "-q", "--filter", f"label={label}"], env)
    return listing.stdout.decode("utf-8", "replace").split() if listing.ok else []


async def _query(argv: list[str], environ: Mapping[str, str]) -> ProcessResult:
    try:
        return await run_process(
            argv,
            env=engine_env(environ),
            cwd=None,
            timeout_s=_PROBE_TIMEOUT_S,
            stdout_limit=_PROBE_LIMIT,
            stderr_limit=_PROBE_LIMIT,
            combined_limit=2 * _PROBE_LIMIT,
        )
    except RunFailedError as exc:  # not started (a binary that vanished): nothing listed
        return ProcessResult("exited", 127, b"", b"", detail=str(exc))


def _prefix(engine: Engine) -> list[str]:
    if engine.runtime and engine.kind == "podman":
        return [engine.binary, "--runtime", engine.runtime]
    return [engine.binary]
