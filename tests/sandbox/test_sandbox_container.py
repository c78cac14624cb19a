"""Container command construction, fail-closed preflight, and (with podman) a real run."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from agentctl.errors import PolicyDeniedError
from agentctl.mailbox.messages import Execute
from agentctl.sandbox.container import (
    ContainerLimits,
    container_argv,
    engine_env,
    oci_runtime_for,
    preflight,
)
from agentctl.workers.executors import UncertainEffect
from agentctl.workers.executors.shell import execute_shell

DIGEST = "sha256:" + "a" * 64
TEST_IMAGE = "localhost/agentctl-test"


def _argv(engine: str = "/usr/bin/podman", runtime: str | None = "runc") -> list[str]:
    return container_argv(
        engine,
        runtime,
        f"img@{DIGEST}",
        "agentctl-e1",
        "/bin/echo",
        ["hi", "there"],
        ["TOKEN"],
        "/work/ws",
        ContainerLimits(64 * 1024 * 1024, 500, 32),
    )


def test_podman_argv_carries_every_isolation_flag() -> None:
    argv = _argv()
    assert argv[:4] == ["/usr/bin/podman", "--runtime", "runc", "run"]
    joined = " ".join(argv)
    for flag in [
        "--rm",
        "--pull=never",
        "--name agentctl-e1",
        "--network=none",
        "--read-only",
        "--user 65532:65532",
        "--cap-drop=ALL",
        "--security-opt no-new-privileges",
        "--memory=67108864b",
        "--cpus=0.5",
        "--pids-limit=32",
        "--tmpfs /tmp:rw,size=16m,noexec,nosuid,nodev",
        "-v /work/ws:/workspace:ro",
        "--workdir /workspace",
        "--ulimit nofile=1024:1024",
        "--ulimit nproc=256:256",
        "-e TOKEN",
    ]:
        assert flag in joined, flag
    # The image comes right after the entrypoint, then the arguments, in order.
    assert argv[-5:] == ["--entrypoint", "/bin/echo", f"img@{DIGEST}", "hi", "there"]


def test_env_crosses_by_name_only() -> None:
    argv = _argv()
    assert "TOKEN" in argv and not any("TOKEN=" in a for a in argv)


def test_docker_takes_runtime_as_a_run_option() -> None:
    argv = _argv("/usr/bin/docker", "runsc")
    assert argv[:4] == ["/usr/bin/docker", "run", "--runtime", "runsc"]
    assert _argv("/usr/bin/docker", None)[:3] == ["/usr/bin/docker", "run", "--rm"]


def test_oci_runtime_choice() -> None:
    assert oci_runtime_for("podman", {"AGENTCTL_OCI_RUNTIME": "crun"}) == "crun"
    assert oci_runtime_for("docker", {}) is None
    expected = "runc" if os.path.exists("/usr/sbin/runc") else None
    assert oci_runtime_for("podman", {}) == expected


def test_engine_env_keeps_only_engine_variables() -> None:
    env = engine_env({"PATH": "/bin", "SECRET": "s", "XDG_RUNTIME_DIR": "/run/u"})
    assert env == {"PATH": "/bin", "XDG_RUNTIME_DIR": "/run/u"}


async def test_preflight_fails_closed_without_an_engine(tmp_path: Path) -> None:
    with pytest.raises(PolicyDeniedError, match="not installed"):
        await preflight("auto", f"img@{DIGEST}", {"PATH": str(tmp_path)})


async def test_preflight_fails_closed_for_a_missing_image() -> None:
    if shutil.which("podman") is None and shutil.which("docker") is None:
        pytest.skip("no container engine client installed")
    with pytest.raises(PolicyDeniedError):
        await preflight("auto", f"localhost/agentctl-absent@{DIGEST}")


def _test_image_digest() -> str | None:
    if shutil.which("podman") is None:
        return None
    runtime = oci_runtime_for("podman", os.environ)
    prefix = ["podman"] + (["--runtime", runtime] if runtime else [])
    for ref in (f"{TEST_IMAGE}:1", f"{TEST_IMAGE}:latest", TEST_IMAGE):
        proc = subprocess.run(
            [*prefix, "image", "inspect", ref, "--format", "{{.Digest}}"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        if proc.returncode == 0 and proc.stdout.strip().startswith("sha256:"):
            return f"{TEST_IMAGE}@{proc.stdout.strip()}"
    return None


def _shell(tmp_path: Path, image: str, command: str, args: list[str]) -> Execute:
    request = {
        "workspace": str(tmp_path),
        "command": command,
        "args": args,
        "isolation": "container",
        "container": {"image": image, "runtime": "podman", "memoryLimitBytes": 64 * 1024 * 1024},
        "limits": {"timeoutSeconds": 60},
    }
    return Execute(
        effect_id=os.urandom(8).hex(),
        run_id="r",
        task_id="t",
        attempt=1,
        operation="builtin.shell.exec",
        request=request,
        timeout_seconds=120,
    )


@pytest.mark.container
async def test_real_container_runs_confined(tmp_path: Path) -> None:
    if shutil.which("podman") is None:
        pytest.skip("podman is not installed")
    image = _test_image_digest()
    if image is None:
        pytest.skip(
            f"image {TEST_IMAGE} is not present locally (run scripts/setup-system.sh; see docs/containers.md)"
        )
    tmp_path.chmod(0o755)  # the container user 65532 must be able to read the workspace
    (tmp_path / "seen.txt").write_text("from host")
    (tmp_path / "seen.txt").chmod(0o644)
    out = await execute_shell(
        _shell(tmp_path, image, "/bin/sh", ["-c", "echo hi; id -u; cat seen.txt"])
    )
    assert out.output["stdout"].split() == ["hi", "65532", "from", "host"]
    tmp_path.chmod(0o777)  # only the read-only bind may stop the write now
    try:
        await execute_shell(_shell(tmp_path, image, "/bin/sh", ["-c", "echo x > /workspace/new"]))
    except UncertainEffect as exc:
        pytest.fail(f"unexpected uncertain outcome: {exc.error.message}")
    except PolicyDeniedError:
        raise
    except Exception as exc:  # the write fails inside the container: a nonzero exit
        assert "exited with code" in str(exc)
    else:
        pytest.fail("writing to /workspace succeeded inside the container")
    assert not (tmp_path / "new").exists()


@pytest.mark.container
async def test_container_timeout_is_uncertain_and_removes_the_container(tmp_path: Path) -> None:
    image = _test_image_digest()
    if image is None:
        pytest.skip(f"podman or the image {TEST_IMAGE} is not available")
    msg = _shell(tmp_path, image, "/bin/sleep", ["60"])
    msg = msg.model_copy(update={"request": {**msg.request, "limits": {"timeoutSeconds": 2}}})
    with pytest.raises(UncertainEffect, match="timed out"):
        await execute_shell(msg)
    listed = subprocess.run(
        ["podman", "ps", "-a", "--format", "{{.Names}}"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert f"agentctl-{msg.effect_id[:40]}" not in listed.stdout.split()


@pytest.mark.container
async def test_container_cwd_is_checked_and_honoured_under_the_mount(tmp_path: Path) -> None:
    # As on the host: a directory inside the workspace, where the process starts (its path
    # under the read-only mount); anything else is refused before a container is started.
    image = _test_image_digest()
    if image is None:
        pytest.skip(f"podman or the image {TEST_IMAGE} is not available")
    tmp_path.chmod(0o755)
    (tmp_path / "sub" / "deep").mkdir(parents=True)
    (tmp_path / "sub").chmod(0o755)
    (tmp_path / "sub" / "deep").chmod(0o755)

    def with_cwd(cwd: str) -> Execute:
        msg = _shell(tmp_path, image, "/bin/sh", ["-c", "pwd"])
        return msg.model_copy(update={"request": {**msg.request, "cwd": cwd}})

    assert (await execute_shell(with_cwd("sub/deep"))).output["stdout"] == "/workspace/sub/deep\n"
    assert (await execute_shell(with_cwd("."))).output["stdout"] == "/workspace\n"
    for bad, why in (("../..", "contains '..'"), ("/etc", "is absolute"), ("nosuch", "not a dir")):
        with pytest.raises(PolicyDeniedError, match=why):
            await execute_shell(with_cwd(bad))


def test_the_container_starts_in_the_workdir_it_is_given() -> None:
    argv = container_argv(
        "/usr/bin/podman",
        "runc",
        "img@sha256:" + "0" * 64,
        "n",
        "/bin/sh",
        [],
        [],
        "/ws",
        ContainerLimits(1 << 26, 500, 64),
        workdir="/workspace/sub",
    )
    assert argv[argv.index("--workdir") + 1] == "/workspace/sub"
    assert argv[argv.index("-v") + 1] == "/ws:/workspace:ro"
