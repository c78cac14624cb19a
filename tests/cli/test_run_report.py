"""The operator's views of a run, from the outside: human ``inspect``, ``runs list`` filters and
the HTML report opened in headless Chromium (issue 16 items 2 and 3).

One lineage serves every test: a run whose tasks wait for approvals, one task failing; then a
``retry --failed`` that succeeds. A task's output carries hostile HTML that would fetch from a
live HTTP server on 127.0.0.1 if the report ever let it through unescaped.

The report's screenshot is kept in ``test-artifacts/run-report.png`` (git-ignored) at the
repository root, next to the report itself.
"""

from __future__ import annotations

import http.server
import re
import shlex
import shutil
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import pytest

from tests.conftest import REPO, Cli

pytestmark = pytest.mark.sqlite_only(
    reason="one lineage per module, built on SQLite; printed commands quote the --db path"
)

ARTIFACTS = REPO / "test-artifacts"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ANSI = "\x1b["

WORKFLOW = """\
apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: { name: lineage }
spec:
  policy: { approval: mutations, processAllowlist: [sh], writableRoots: [out] }
  runtime: { budgets: { maxTasks: 10 } }
  actions:
    a: { kind: builtin.shell.exec, command: /bin/sh, args: ["-c", "cat hostile.txt"] }
    b: { kind: builtin.shell.exec, command: /bin/sh, args: ["-c", "test -f ok.flag"] }
    c: { kind: builtin.shell.exec, command: /bin/sh, args: ["-c", "echo C"] }
    save: { kind: builtin.write }
  tasks:
    - { id: a, uses: "action:a" }
    - { id: save, uses: "action:save", needs: [a], with: { path: out/a.txt, content: "${{ tasks.a.output.stdout }}" } }
    - { id: b, uses: "action:b", needs: [a] }
    - { id: c, uses: "action:c", needs: [b, save] }
"""
TASKS = ("a", "save", "b", "c")
# The task graph's edges whose two ends touch their two tasks' boxes, as "from>to".
EDGES_LAND_ON_NODES = """() => {
  const box = id => document.querySelector(`#task-graph g.node[data-task-id="${id}"] rect`)
    .getBBox();
  const near = (p, b) => p.x >= b.x - 8 && p.x <= b.x + b.width + 8
    && p.y >= b.y + b.height / 4 && p.y <= b.y + b.height * 3 / 4;
  return [...document.querySelectorAll("#task-graph path.edge")].filter(e => {
    const start = e.getPointAtLength(0), end = e.getPointAtLength(e.getTotalLength());
    return near(start, box(e.dataset.from)) && near(end, box(e.dataset.to));
  }).map(e => `${e.dataset.from}>${e.dataset.to}`).sort();
}"""


class _Recorder(http.server.BaseHTTPRequestHandler):
    hits: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        type(self).hits.append(self.path)
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass  # keep the test output clean


@pytest.fixture(scope="module")
def leak_server() -> Iterator[str]:
    """A live server a leaked <img>/<script> in the report would reach."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    thread.join()


@dataclass
class Lineage:
    ws: Path
    db: Path
    source: str  # failed after approvals
    retry: str  # succeeded, derived from ``source``
    paused_view: str  # the human inspect of ``source`` while it waited for its first approval
    approve_cmd: list[str]  # the approve command that view printed, as argv


def _pending(cli: Cli, run_id: str, db: Path) -> list[str]:
    got = cli("--output", "json", "approvals", "list", run_id, "--db", str(db))
    assert got.rc == 0, got.stderr
    return [a["approvalId"] for a in got.data["approvals"]]


def _approve_until_done(cli: Cli, run_id: str, db: Path, ws: Path) -> int:
    rc = 3
    while rc == 3:
        approval = _pending(cli, run_id, db)[0]  # parallel tasks may wait together
        got = cli("approvals", "approve", approval, "--reason", "ok", "--db", str(db), cwd=ws)
        assert got.rc == 0, got.stderr
        rc = cli("resume", run_id, "--db", str(db), cwd=ws).rc
    return rc


def _printed_commands(view: str) -> list[list[str]]:
    """The ``$ agentctl …`` commands of a human view, continuation lines joined, as argv."""
    text = re.sub(r" \\\n\s+", " ", view)
    return [shlex.split(m) for m in re.findall(r"^\s+\$ (agentctl .*)$", text, re.M)]


@pytest.fixture(scope="module")
def lineage(tmp_path_factory: pytest.TempPathFactory, leak_server: str) -> Lineage:
    from tests.conftest import CliResult, agentctl_argv, cli_env

    root = tmp_path_factory.mktemp("lineage")
    ws, db = root / "ws", root / "state" / "r.db"
    ws.mkdir()
    (ws / "wf.yaml").write_text(WORKFLOW)
    hostile = f'<img src="{leak_server}/img"><script>fetch("{leak_server}/js")</script>&amp;'
    (ws / "hostile.txt").write_text(hostile)

    def cli(*args: str, cwd: Path | None = None) -> CliResult:
        import subprocess

        proc = subprocess.run(
            agentctl_argv(*args), cwd=cwd or ws, env=cli_env(), capture_output=True, text=True
        )
        return CliResult(proc.returncode, proc.stdout, proc.stderr)

    first = cli("--output", "json", "run", "wf.yaml", "--db", str(db))
    assert first.rc == 3, first.stderr
    source = first.data["runId"]
    view = cli("inspect", source, "--db", str(db))
    assert view.rc == 0, view.stderr
    approve = next(c for c in _printed_commands(view.stdout) if c[1:3] == ["approvals", "approve"])
    got = cli(*approve[1:])  # the printed command, exactly as printed, resolves the approval
    assert got.rc == 0, got.stderr
    assert cli("resume", source, "--db", str(db)).rc == 3
    assert _approve_until_done(cli, source, db, ws) == 4  # b fails: no ok.flag yet
    (ws / "ok.flag").write_text("")
    retried = cli("--output", "json", "retry", "wf.yaml", source, "--failed", "--db", str(db))
    assert retried.rc == 3, retried.stderr
    retry = retried.data["runId"]
    assert _approve_until_done(cli, retry, db, ws) == 0
    return Lineage(ws, db, source, retry, view.stdout, approve)


def test_human_inspect_of_a_paused_run_says_how_to_unblock_it(lineage: Lineage) -> None:
    view = lineage.paused_view
    assert ANSI not in view, "stdout is not a terminal: no colour"
    assert all(len(line) <= 80 for line in view.splitlines()), view
    assert f"run      {lineage.source}  paused" in view
    assert re.search(r"^  a\s+waiting_for_approval\s+1\s", view, re.M), view
    commands = _printed_commands(view)
    db = ["--db", str(lineage.db)]
    approve = lineage.approve_cmd
    assert approve[:3] == ["agentctl", "approvals", "approve"] and approve[-2:] == db
    assert ["agentctl", "approvals", "reject", approve[3], "--reason", "<why>", *db] in commands
    assert commands[-1] == ["agentctl", "resume", lineage.source, *db]


def test_human_inspect_shows_lineage_durations_budget_and_errors(
    cli: Cli, lineage: Lineage
) -> None:
    got = cli("--color", "never", "inspect", lineage.source, "--db", str(lineage.db))
    assert got.rc == 0, got.stderr
    view = got.stdout
    assert ANSI not in view and all(len(line) <= 80 for line in view.splitlines()), view
    assert f"child  {lineage.retry} (retry, succeeded)" in view
    assert re.search(r"^duration \d+\.\ds", view, re.M), view
    assert "\nbudget   tasks 4 / 10 (40%)\n" in view
    assert re.search(r"^ +no limit: artifactBytes \d+, processOutputBytes \d+$", view, re.M), view
    assert re.search(r"^  b\s+failed\s+1\s+executed\s+\d+\.\ds$", view, re.M), view
    assert "  b: process exited with code 1" in view
    assert "needs an operator" not in view, "a failed run with nothing unresolved"
    retry = cli("inspect", lineage.retry, "--db", str(lineage.db)).stdout
    assert f"source {lineage.source}" in retry
    assert re.search(r"^  a\s+succeeded\s+0\s+reused\s+-$", retry, re.M), retry
    coloured = cli("--color", "always", "inspect", lineage.source, "--db", str(lineage.db))
    assert f"{ANSI}31mfailed{ANSI}0m" in coloured.stdout


def test_runs_list_filters_by_state_and_workflow_and_shows_durations(
    cli: Cli, lineage: Lineage
) -> None:
    db = ["--db", str(lineage.db)]
    failed = cli("--output", "json", "runs", "list", "--state", "failed", *db)
    assert [r["runId"] for r in failed.data["runs"]] == [lineage.source]
    mine = cli("--output", "json", "runs", "list", "--workflow", "lineage", *db)
    assert [r["runId"] for r in mine.data["runs"]] == [lineage.retry, lineage.source]
    both = cli(
        "--output", "json", "runs", "list", "--workflow", "lineage", "--state", "paused", *db
    )
    assert both.data["runs"] == []
    assert cli("--output", "json", "runs", "list", "--workflow", "other", *db).data["runs"] == []
    human = cli("runs", "list", "--workflow", "lineage", *db).stdout
    assert re.search(rf"^  {lineage.retry}\s+succeeded\s+retry\s+lineage\s+\d+\.\ds", human, re.M)
    assert re.search(rf"^  {lineage.source}\s+failed\s+execute\s+lineage\s+\d+\.\ds", human, re.M)
    assert "no runs" in cli("runs", "list", "--workflow", "other", *db).stdout


def test_json_inspect_envelope_is_the_same_with_html(cli: Cli, lineage: Lineage) -> None:
    db = ["--db", str(lineage.db)]
    plain = cli("--output", "json", "inspect", lineage.retry, *db)
    out = lineage.ws.parent / "r.html"
    with_html = cli("--output", "json", "inspect", lineage.retry, "--html", str(out), *db)
    assert plain.rc == with_html.rc == 0
    assert plain.data == with_html.data and out.is_file()
    assert set(plain.data) >= {"run", "tasks", "effects", "approvals", "audit", "budget"}


def test_html_report_creates_missing_directories_and_refuses_unwritable_paths(
    cli: Cli, lineage: Lineage
) -> None:
    """As docs/cli.md says: missing parent directories are created (as ``schema --write``
    does); a directory, or a file standing where a directory must be, is exit 2."""
    db = ["--db", str(lineage.db)]
    out = lineage.ws.parent / "reports" / "deeper" / "r.html"
    made = cli("--output", "json", "inspect", lineage.retry, "--html", str(out), *db)
    assert made.rc == 0 and out.read_text().startswith("<!DOCTYPE html>"), made.stderr
    for target in (out.parent, out / "under-a-file.html"):
        refused = cli("--output", "json", "inspect", lineage.retry, "--html", str(target), *db)
        assert refused.rc == 2 and "cannot write" in refused.error["error"]["message"]


def test_html_report_never_overwrites_the_ledgers_own_state(cli: Cli, lineage: Lineage) -> None:
    """The report replaces its file, so the database, a file SQLite keeps beside it, a link to
    either, or a path inside the artifact store is refused (exit 2) before anything is
    written, as ``artifacts export`` refuses them; the ledger reads as before."""
    db = ["--db", str(lineage.db)]
    before = lineage.db.read_bytes()
    link = lineage.ws.parent / "looks-like-a-report.html"
    link.unlink(missing_ok=True)
    link.symlink_to(lineage.db)
    blobs = lineage.db.parent / "artifacts"
    for target in (lineage.db, Path(f"{lineage.db}-wal"), link, blobs / "r.html"):
        refused = cli("--output", "json", "inspect", lineage.retry, "--html", str(target), *db)
        assert refused.rc == 2, (target, refused.stderr)
        assert "refusing to write the report" in refused.error["error"]["message"]
    assert not (blobs / "r.html").exists() and link.is_symlink()
    assert lineage.db.read_bytes() == before
    assert cli("--output", "json", "inspect", lineage.retry, *db).rc == 0


def test_html_report_opens_offline_in_chromium_with_graph_and_lineage(
    cli: Cli, lineage: Lineage, leak_server: str
) -> None:
    playwright = pytest.importorskip("playwright.sync_api")
    if not Path(CHROMIUM).exists():
        pytest.skip("Debian's chromium is not installed (scripts/setup-system.sh installs it)")
    ARTIFACTS.mkdir(exist_ok=True)
    report = ARTIFACTS / "run-report.html"
    got = cli("inspect", lineage.retry, "--db", str(lineage.db), "--html", str(report))
    assert got.rc == 0 and f"to {report}" in got.stdout, got.stderr
    with playwright.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1200, "height": 900})
        requests: list[str] = []
        page.on("request", lambda r: requests.append(r.url))
        page.goto(report.as_uri(), wait_until="load")
        page.screenshot(path=str(ARTIFACTS / "run-report.png"), full_page=True)
        _check_report_page(page, lineage)
        browser.close()
    assert requests == [report.as_uri()], requests
    assert _Recorder.hits == []


def _check_report_page(page: object, lineage: Lineage) -> None:
    from playwright.sync_api import Page

    assert isinstance(page, Page)
    assert page.locator("#run-id").inner_text() == lineage.retry
    nodes = page.locator("#task-graph g.node")
    assert sorted(nodes.evaluate_all("ns => ns.map(n => n.dataset.taskId)")) == sorted(TASKS)
    for task in TASKS:
        node = page.locator(f'#task-graph g.node[data-task-id="{task}"]')
        assert "state-succeeded" in (node.get_attribute("class") or "")
        assert page.locator("#tasks td .task-id", has_text=re.compile(f"^{task}$")).count() == 1
    assert page.evaluate(EDGES_LAND_ON_NODES) == ["a>b", "a>save", "b>c", "save>c"]
    timeline = page.locator("#timeline g[data-task-id]")
    assert timeline.evaluate_all("gs => gs.map(g => g.dataset.taskId)") == ["b", "c"]
    lineage_ids = page.locator("#lineage li").evaluate_all("ls => ls.map(l => l.dataset.runId)")
    assert lineage_ids == [lineage.source, lineage.retry]
    link = page.locator(f'a.run-link[href="#lineage-{lineage.source}"]').first
    assert link.is_visible()
    link.click()
    assert page.evaluate("location.hash") == f"#lineage-{lineage.source}"
    assert page.locator("#approvals tbody tr").count() == 2  # b and c asked, both approved
    assert page.locator("#audit tbody tr").count() > 10
    assert page.locator("img").count() == 0 and page.locator("script").count() == 0
    page.locator("#tasks details summary").first.click()  # a's output, unfolded
    shown = page.locator("#tasks details pre").first.inner_text()
    assert "<img src=" in shown and "<script>fetch(" in shown and "&amp;" in shown


def test_html_report_of_the_source_links_its_retry(cli: Cli, lineage: Lineage) -> None:
    out = lineage.ws.parent / "source.html"
    got = cli("inspect", lineage.source, "--db", str(lineage.db), "--html", str(out))
    assert got.rc == 0, got.stderr
    html = out.read_text()
    assert f'href="#lineage-{lineage.retry}"' in html and f'id="lineage-{lineage.retry}"' in html
    assert "<img" not in html and "<script" not in html and "&lt;img src=" in html
    assert 'http-equiv="Content-Security-Policy" content="default-src \'none\'' in html


WAITER = """\
apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: { name: waiter }
spec:
  policy: { approval: never, processAllowlist: [sh] }
  actions:
    wait: { kind: builtin.shell.exec, command: /bin/sh, args: ["-c", "touch started; while [ ! -f go ]; do sleep 0.1; done"] }
  tasks:
    - { id: w, uses: "action:wait" }
"""


def test_human_inspect_of_an_uncertain_effect_prints_commands_that_resolve_it(
    cli: Cli, tmp_path: Path
) -> None:
    import subprocess
    import time

    from tests.conftest import agentctl_argv, cli_env

    (tmp_path / "wf.yaml").write_text(WAITER)
    db = ["--db", "state.db"]  # relative: the printed commands run in the same directory
    argv = agentctl_argv("--output", "json", "run", "wf.yaml", *db)
    proc = subprocess.Popen(argv, cwd=tmp_path, env=cli_env(), stdin=subprocess.DEVNULL)
    deadline = time.monotonic() + 60  # a liveness bound only: the effect must get dispatched
    while not (tmp_path / "started").exists():
        assert time.monotonic() < deadline and proc.poll() is None, "never dispatched"
        time.sleep(0.05)
    run_id = cli("--output", "json", "runs", "list", *db).data["runs"][0]["runId"]
    driven = cli("inspect", run_id, *db).stdout
    assert (
        re.search(r"builtin\.shell\.exec\s+started", driven) and "needs an operator" not in driven
    )
    proc.kill()  # the coordinator dies mid-effect: nobody knows whether it finished
    proc.wait()
    assert cli("resume", run_id, *db).rc == 3  # refused: the effect is uncertain
    view = cli("inspect", run_id, *db).stdout
    effect = cli("--output", "json", "effects", "list", run_id, *db).data["effects"][0]
    assert effect["status"] == "uncertain" and f"uncertain effect {effect['effectId']}" in view
    commands = _printed_commands(view)
    verb = ["agentctl", "effects", "reconcile", effect["effectId"], "--status"]
    result = ["--result-file", "<result.json>"]  # applied names the result the task goes on with
    assert [
        [*verb, "applied", "--reason", "<why>", *result, *db],
        [*verb, "not-applied", "--reason", "<why>", *db],
    ] == [c for c in commands if c[:3] == verb[:3]]
    assert commands[-1] == ["agentctl", "resume", run_id, *db]
    (tmp_path / "go").write_text("")
    not_applied = next(c for c in commands if "not-applied" in c)
    assert cli(*not_applied[1:]).rc == 0
    assert cli(*commands[-1][1:]).rc == 0  # the printed resume now finishes the run
    after = cli("inspect", run_id, *db).stdout
    assert "needs an operator" not in after and "not_applied" in after
