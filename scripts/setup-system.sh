#!/usr/bin/env bash
# Installs the system packages the test suite needs (podman with runc, a static busybox,
# chromium for the HTML report test, and Debian's PostgreSQL server binaries for the
# PostgreSQL variants of the CLI suite) and builds the tiny local container image the container
# tests run. Idempotent; needs root (or sudo) for apt. Without them it says so, and the
# container, browser and PostgreSQL tests skip with that reason (under CI=true the PostgreSQL
# ones fail instead: tests/pgserver.py).
set -euo pipefail
IMAGE=localhost/agentctl-test:1
SUDO=""
if [ "$(id -u)" != "0" ]; then
  if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then SUDO="sudo -n"; else
    echo "setup-system: not root and no sudo; skipping podman install (container tests will skip)"
    exit 0
  fi
fi
need=()
command -v podman >/dev/null 2>&1 || need+=(podman)
[ -x /usr/sbin/runc ] || [ -x /usr/bin/runc ] || need+=(runc)
[ -x /bin/busybox ] || need+=(busybox-static)
# Headless Chromium for the HTML run report test (Playwright drives it; it never downloads one).
command -v chromium >/dev/null 2>&1 || need+=(chromium)
# PostgreSQL server binaries only: tests/pgserver.py starts a private server per test session
# (initdb + pg_ctl as the postgres user), so Debian's own cluster is neither created nor started.
if ! ls /usr/lib/postgresql/*/bin/pg_ctl >/dev/null 2>&1; then
  need+=(postgresql)
  $SUDO mkdir -p /etc/postgresql-common
  echo "create_main_cluster = false" | $SUDO tee /etc/postgresql-common/createcluster.conf >/dev/null
fi
if [ ${#need[@]} -gt 0 ]; then
  echo "setup-system: installing ${need[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
fi
# podman here needs runc and explicit ulimits (see docs/containers.md).
if [ ! -f /etc/containers/containers.conf ] || ! grep -q 'runtime = "runc"' /etc/containers/containers.conf; then
  $SUDO mkdir -p /etc/containers
  printf '[containers]\ndefault_ulimits = ["nofile=1024:1024", "nproc=256:256"]\n[engine]\nruntime = "runc"\n' \
    | $SUDO tee /etc/containers/containers.conf >/dev/null
fi
if ! $SUDO podman image exists "$IMAGE" 2>/dev/null; then
  root=$(mktemp -d)
  mkdir -p "$root/bin"
  cp /bin/busybox "$root/bin/"
  for c in sh echo cat ls id sleep touch env printf; do ln -sf busybox "$root/bin/$c"; done
  tar -C "$root" -cf "$root.tar" .
  $SUDO podman import -q "$root.tar" "$IMAGE" >/dev/null
  rm -rf "$root" "$root.tar"
fi
pg_ctl=$(ls /usr/lib/postgresql/*/bin/pg_ctl | sort -V | tail -1)
echo "setup-system: PostgreSQL $("$pg_ctl" --version | awk '{print $3}') binaries (no cluster service)"
echo "setup-system: podman $($SUDO podman --version | awk '{print $3}'), image $IMAGE $($SUDO podman image inspect "$IMAGE" --format '{{.Digest}}')"
