#!/usr/bin/env bash
# The main job on the bundled example: validate, plan, run, inspect — in a fresh directory so
# the demo never touches the checkout's own state.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
ctl="$here/.venv/bin/agentctl"
work=$(mktemp -d "${TMPDIR:-/tmp}/agentctl-demo.XXXXXX")
cp "$here/examples/hello.yaml" "$work/"
cd "$work"
echo "# demo directory: $work"
echo "\$ agentctl check hello.yaml";  "$ctl" check hello.yaml
echo "\$ agentctl plan hello.yaml";   "$ctl" plan hello.yaml
echo "\$ agentctl run hello.yaml";     "$ctl" run hello.yaml
run_id=$("$ctl" --output json runs list --limit 1 | python3 -c 'import json,sys; print(json.load(sys.stdin)["data"]["runs"][0]["runId"])')
echo "\$ agentctl inspect $run_id";    "$ctl" inspect "$run_id"
echo "\$ cat out/hello.txt";           cat out/hello.txt; echo
