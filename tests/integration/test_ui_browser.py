"""The run explorer in a real browser (headless Debian Chromium driven by Playwright): the run
list, a run drawn with its path, a failure's traceback, cancelling a running run, resuming a
paused one with a state patch, forking a run from a step, and the schedules page. Screenshots go to $GRAPHRUNNER_UI_SCREENSHOTS (default /tmp)."""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_ui_api import HELLO, PAUSING, SLEEPING, graph_file
from test_ui_server import PASSWORD, USER, UiServer, unique
from test_ui_time_travel import COUNTING

from graphrunner.client import Client
from graphrunner.embedded import EmbeddedRedis

CHROMIUM = "/usr/bin/chromium"
WAIT_MS = 30_000
SHOTS = Path(os.environ.get("GRAPHRUNNER_UI_SCREENSHOTS", "/tmp"))
FAILING = """
id: {graph_id}
config: {{start: a}}
nodes:
  a:
    action: {{tool: python, params: {{fn: "failure_targets:boom", args: {{x: 3}}}}}}
"""
BRANCHING = """
id: {graph_id}
inputs: {{score: {{type: number, required: true}}}}
config: {{start: grade}}
nodes:
  grade:
    type: gate
    next:
      - {{to: publish, when: "inputs.score >= 50.0"}}
      - to: review
  publish: {{action: {{tool: echo, params: {{ok: true}}}}, next: done}}
  review: {{action: {{tool: echo, params: {{ok: false}}}}, next: done}}
  done: {{type: return}}
"""

if not shutil.which(CHROMIUM):
    pytest.fail(f"{CHROMIUM} is missing: `make setup` installs Debian's chromium", pytrace=False)

from playwright.sync_api import Browser, Page, expect, sync_playwright  # noqa: E402


@pytest.fixture(scope="module")
def graphs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("ui-browser-graphs")


@pytest.fixture(scope="module")
def server(redis_server: EmbeddedRedis, cluster: Client, graphs: Path) -> Iterator[UiServer]:
    with UiServer(redis_server.url, graphs, "--basic-auth", f"{USER}:{PASSWORD}") as ui:
        yield ui


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture
def page(browser: Browser, server: UiServer) -> Iterator[Page]:
    context = browser.new_context(
        base_url=server.url,
        http_credentials={"username": USER, "password": PASSWORD},
        viewport={"width": 1280, "height": 900},
    )
    context.set_default_timeout(WAIT_MS)
    opened = context.new_page()
    opened.on("dialog", lambda dialog: dialog.accept())
    try:
        yield opened
    finally:
        context.close()


def test_list_then_open_a_run_and_see_its_path(page: Page, graphs: Path, cluster: Client) -> None:
    graph_id = unique("ui/branching")
    run = cluster.submit(str(graph_file(graphs, BRANCHING, graph_id)), {"score": 80})
    assert run.wait(timeout=60).status == "completed"
    page.goto("/")
    row = page.locator(f'tr[data-run-id="{run.id}"]')
    expect(row).to_contain_text("completed")
    expect(row).to_contain_text(graph_id)
    page.screenshot(path=str(SHOTS / "ui_runs.png"), full_page=True)
    row.locator("a.run-link").click()
    expect(page).to_have_url(re.compile(f"/runs/{run.id}$"))
    expect(page.locator("#run-status")).to_have_text("completed")
    svg = page.locator("#graph svg")
    expect(svg.locator("g#node-publish")).to_have_class(re.compile(r"\bvisited\b"))
    expect(svg.locator("g#node-review")).not_to_have_class(re.compile(r"\bvisited\b"))
    expect(svg.locator('g.edge.taken[data-source="grade"][data-target="publish"]')).to_have_count(1)
    expect(page.locator("#steps tbody tr")).to_have_count(3)
    expect(page.locator("p.path")).to_contain_text("grade → publish → done")
    page.screenshot(path=str(SHOTS / "ui_run.png"), full_page=True)
    page.locator("a", has_text=graph_id).first.click()
    expect(page.locator("section.version .drawing svg")).to_have_count(1)
    expect(page.locator("table.runs")).to_contain_text(run.id)
    page.screenshot(path=str(SHOTS / "ui_graph.png"), full_page=True)


def test_the_list_updates_itself(page: Page, graphs: Path, cluster: Client) -> None:
    graph_id = unique("ui/live")
    path = graph_file(graphs, BRANCHING, graph_id)
    page.goto(f"/?graph={graph_id}")
    expect(page.locator("#runs tbody tr")).to_have_count(0)
    run = cluster.submit(str(path), {"score": 10})
    row = page.locator(f'tr[data-run-id="{run.id}"]')
    expect(row).to_contain_text("completed", timeout=WAIT_MS)  # no reload: the page polls /api/runs
    expect(row.locator("a.run-link")).to_have_attribute("href", f"/runs/{run.id}")


def test_a_failed_run_shows_the_failing_node_and_its_traceback(
    page: Page, graphs: Path, cluster: Client
) -> None:
    run = cluster.submit(str(graph_file(graphs, FAILING, unique("ui/failing"))))
    assert run.wait(timeout=60).status == "failed"
    page.goto(f"/runs/{run.id}")
    expect(page.locator("#graph svg g#node-a")).to_have_class(re.compile(r"\bfailed\b"))
    failed_row = page.locator("#steps tbody tr.step.error")
    expect(failed_row).to_contain_text("ValueError")
    failed_row.locator("summary", has_text="Traceback").click()
    expect(failed_row.locator("pre.traceback")).to_contain_text("ValueError: I do not like 3")
    page.screenshot(path=str(SHOTS / "ui_failed.png"), full_page=True)


def test_cancel_a_running_run(page: Page, graphs: Path, cluster: Client) -> None:
    run = cluster.submit(str(graph_file(graphs, SLEEPING, unique("ui/sleeping"))))
    page.goto(f"/runs/{run.id}")
    expect(page.locator("#run-status")).to_have_text("running")
    page.locator("#cancel").click()
    expect(page.locator("#run-status")).to_have_text("cancelled", timeout=WAIT_MS)
    assert run.wait(timeout=60).status == "cancelled"
    expect(page.locator("#cancel")).to_have_count(0)


def test_resume_a_paused_run_with_a_state_patch(page: Page, graphs: Path, cluster: Client) -> None:
    # resuming needs a login granted what the run carries: this one has the pure built-ins
    run = cluster.submit(str(graph_file(graphs, PAUSING, unique("ui/pausing"))), capabilities=["tool:echo"])
    assert run.wait(timeout=60).status == "paused"
    page.goto(f"/runs/{run.id}")
    expect(page.locator(".pause-message")).to_contain_text("approve the order?")
    expect(page.locator("#graph svg g#node-approval")).to_have_class(re.compile(r"\bcurrent\b"))
    page.locator("#state-patch").fill('{"approved": not json')
    page.locator("#resume").click()
    expect(page.locator("#action-result")).to_contain_text("not JSON")
    page.locator("#state-patch").fill('{"approved": "yes please"}')
    page.locator("#resume").click()
    expect(page.locator("#action-result")).to_contain_text("StateValidationError")
    assert run.status() == "paused"
    page.screenshot(path=str(SHOTS / "ui_paused.png"), full_page=True)
    page.locator("#state-patch").fill('{"approved": true}')
    page.locator("#resume").click()
    expect(page.locator("#run-status")).to_have_text("completed", timeout=WAIT_MS)
    expect(page.locator("#graph svg g#node-ship")).to_have_class(re.compile(r"\bvisited\b"))
    assert run.wait(timeout=60).state["outcome"] == "shipped"
    page.screenshot(path=str(SHOTS / "ui_resumed.png"), full_page=True)


def test_fork_a_completed_run_from_a_step_with_a_patch(page: Page, graphs: Path, cluster: Client) -> None:
    run = cluster.submit(str(graph_file(graphs, COUNTING, unique("ui/counting"))), capabilities=["tool:echo"])
    assert run.wait(timeout=60).state["n"] == 3
    page.goto(f"/runs/{run.id}")
    page.locator('button.fork-here[data-step="1"]').click()
    expect(page.locator("#fork-state")).to_contain_text('"n": 1')  # the state that step left
    page.locator("#fork-patch").fill('{"n": "ten"}')
    page.locator("#fork").click()
    expect(page.locator("#action-result")).to_contain_text("StateValidationError")
    page.screenshot(path=str(SHOTS / "ui_fork.png"), full_page=True)
    page.locator("#fork-patch").fill('{"n": 10}')
    page.locator("#fork").click()
    expect(page.locator("a.forked-from")).to_have_text(run.id)  # the new run's page
    forked = page.locator("#run").get_attribute("data-run-id")
    assert forked is not None and forked != run.id
    assert cluster.run(forked).wait(timeout=60).state["n"] == 12  # b and c ran again, a did not
    expect(page.locator("#run-status")).to_have_text("completed", timeout=WAIT_MS)
    page.screenshot(path=str(SHOTS / "ui_forked.png"), full_page=True)


def test_the_schedules_page_resumes_triggers_and_pauses(page: Page, graphs: Path, cluster: Client) -> None:
    path = graph_file(graphs, HELLO, unique("ui/hello"))
    info = cluster.schedules.add(str(path), "hourly", cron="0 * * * *", inputs={"name": "page"}, paused=True)
    try:
        page.goto("/schedules")
        row = page.locator(f'tr[data-schedule-id="{info.id}"]')
        expect(row).to_contain_text("cron 0 * * * *")
        expect(row.locator(".status.paused")).to_be_visible()
        row.locator('button[data-action="resume"]').click()
        expect(row.locator('button[data-action="pause"]')).to_be_visible()  # the page reloaded
        expect(row.locator(".next-fires .fire")).to_have_count(3)
        row.locator('button[data-action="trigger"]').click()
        expect(page.locator("#action-result")).to_contain_text("Triggered: run")
        started = [r for r in cluster.list_runs(info.graph_id) if r.status != "pending"]
        assert started, "the trigger started no run"
        assert cluster.run(started[0].run_id).wait(timeout=60).state["greeting"] == "Hello, page!"
        page.screenshot(path=str(SHOTS / "ui_schedules.png"), full_page=True)
        page.goto("/schedules")
        row.locator('button[data-action="pause"]').click()
        expect(row.locator(".status.paused")).to_be_visible()
        assert cluster.schedules.get(info.id).paused
    finally:
        cluster.schedules.remove(info.id)
