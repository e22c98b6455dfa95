"""The explorer shows time (issue 26), in a real browser (headless Debian Chromium through
Playwright, as test_ui_browser): a run's timeline with a bar per step, a foreach step's items and
a failed one, queue waits and workers; a graph's per-node stats and their window; the trace link
with GRAPHRUNNER_TRACE_URL set, and none without it. Screenshots go to $GRAPHRUNNER_UI_SCREENSHOTS."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect
from test_ui_api import graph_file
from test_ui_browser import SHOTS, WAIT_MS, browser  # noqa: F401  (browser: the module's fixture)
from test_ui_server import PASSWORD, USER, UiServer, unique
from test_ui_timeline import (
    RETRYING,
    TRACE_ID,
    fan_out_records,
    stats_runs,
    step,
    stored_run,
)

from graphrunner.client import Client
from graphrunner.embedded import EmbeddedRedis
from graphrunner.engine import TraceLink

# a template an attacker would like: quotes and markup, still an http URL (the setting allows it)
HOSTILE_TRACE_URL = 'http://127.0.0.1:16686/trace/{trace_id}?run={run_id}&x="><script>alert(1)</script>'

Opener = Callable[[UiServer], Page]


@pytest.fixture(scope="module")
def graphs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("ui-browser-time-graphs")


@pytest.fixture(scope="module")
def server(redis_server: EmbeddedRedis, cluster: Client, graphs: Path) -> Iterator[UiServer]:
    with UiServer(redis_server.url, graphs, "--basic-auth", f"{USER}:{PASSWORD}") as ui:
        yield ui


@pytest.fixture(scope="module")
def traced(redis_server: EmbeddedRedis, cluster: Client, graphs: Path) -> Iterator[UiServer]:
    env = {"GRAPHRUNNER_TRACE_URL": HOSTILE_TRACE_URL}
    with UiServer(redis_server.url, graphs, "--basic-auth", f"{USER}:{PASSWORD}", env=env) as ui:
        yield ui


@pytest.fixture
def open_page(browser: Browser) -> Iterator[Opener]:  # noqa: F811
    """Opens a logged-in page on a server; any dialog (an injected `alert`) fails the test."""
    contexts = []
    dialogs: list[str] = []

    def opener(ui: UiServer) -> Page:
        context = browser.new_context(
            base_url=ui.url,
            http_credentials={"username": USER, "password": PASSWORD},
            viewport={"width": 1280, "height": 900},
        )
        context.set_default_timeout(WAIT_MS)
        contexts.append(context)
        page = context.new_page()
        page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
        return page

    yield opener
    for context in contexts:
        context.close()
    assert dialogs == [], "a dialog opened: something was injected"


def test_a_run_the_cluster_took_has_a_bar_per_step(
    open_page: Opener, server: UiServer, graphs: Path, cluster: Client
) -> None:
    run = cluster.submit(str(graph_file(graphs, RETRYING, unique("ui/retrying"))))
    assert run.wait(timeout=60).status == "completed_with_errors"
    page = open_page(server)
    page.goto(f"/runs/{run.id}")
    lanes = page.locator("#timeline li.lane")
    expect(lanes).to_have_count(3)
    for lane in lanes.all():
        expect(lane.locator(".track .bar.run")).to_have_count(1)
        expect(lane.locator(".facts .worker")).to_contain_text("on ")
    flaky = page.locator('#timeline li.lane[data-node="flaky"]')
    expect(flaky.locator(".bar.run.error")).to_have_count(1)
    expect(flaky.locator(".facts .mark.retry")).to_contain_text("retry 200 ms")


def test_the_timeline_shows_queue_waits_workers_suspension_and_items(
    open_page: Opener, server: UiServer, cluster: Client
) -> None:
    run_id = stored_run(cluster, unique("ui/fan"), fan_out_records())
    page = open_page(server)
    page.goto(f"/runs/{run_id}")
    expect(page.locator("#timeline li.lane")).to_have_count(3)
    expect(page.locator("#timeline li.lane .track .bar.run")).to_have_count(3)
    prepare = page.locator('#timeline li.lane[data-node="prepare"]')
    expect(prepare.locator(".facts .queue")).to_have_text("queued 12 ms")
    expect(prepare.locator(".facts .worker")).to_have_text("on worker-1:42")
    fan = page.locator('#timeline li.lane[data-node="fan"]')
    expect(fan.locator(".bar.suspended")).to_have_count(1)
    expect(fan.locator(".facts .suspended")).to_have_text("suspended 310 ms")
    expect(fan.locator(".items-count")).to_have_text("5 items")
    expect(fan.locator(".items-failed")).to_have_text("1 failed")
    expect(fan.locator("li.item")).to_have_count(5)
    failed = fan.locator("li.item.failed")
    expect(failed).to_have_count(1)
    expect(failed).to_have_attribute("data-i", "3")
    expect(failed).to_be_visible()  # a step with a failed item opens its list
    expect(failed.locator(".bar.item.failed")).to_have_count(1)
    flaky = page.locator('#timeline li.lane[data-node="flaky"]')
    expect(flaky.locator(".bar.mark.retry")).to_have_count(1)
    expect(flaky.locator(".facts .mark.retry")).to_have_text("retry 1.5 s")
    expect(flaky.locator(".bar.run.error")).to_have_count(1)
    page.locator("#timeline").screenshot(path=str(SHOTS / "ui_timeline.png"))


def test_the_graph_page_shows_per_node_stats_for_a_window(
    open_page: Opener, server: UiServer, graphs: Path, cluster: Client, redis_server: EmbeddedRedis
) -> None:
    graph_id = stats_runs(cluster, graphs, redis_server.url)
    page = open_page(server)
    page.goto(f"/graphs/{graph_id}")
    stats = page.locator("#node-stats")
    expect(stats).to_have_attribute("data-window", "24h")
    expect(stats.locator("#stats-read")).to_contain_text("Read 2 run(s)")
    work = stats.locator('tr[data-node="work"]')
    expect(work.locator(".steps")).to_have_text("5")
    expect(work.locator(".failure-rate")).to_have_text("40.0 %")
    expect(work.locator(".p50")).to_have_text("30 ms")
    expect(work.locator(".p95")).to_have_text("1.0 s")
    page.screenshot(path=str(SHOTS / "ui_graph_stats.png"), full_page=True)
    stats.locator('a.window[data-window="1h"]').click()
    expect(page).to_have_url(re.compile(r"\?window=1h"))
    expect(stats).to_have_attribute("data-window", "1h")
    expect(stats.locator("a.window.current")).to_have_text("1h")
    expect(stats.locator("#stats-read")).to_contain_text("Read 1 run(s)")
    expect(work.locator(".steps")).to_have_text("4")
    expect(work.locator(".errors")).to_have_text("1")
    expect(work.locator(".failure-rate")).to_have_text("25.0 %")
    expect(work.locator(".p50")).to_have_text("20 ms")
    expect(work.locator(".p95")).to_have_text("40 ms")
    expect(work.locator(".retries")).to_have_text("1")


def test_the_trace_link_is_there_with_the_setting_and_absent_without(
    open_page: Opener, server: UiServer, traced: UiServer, cluster: Client
) -> None:
    run_id = stored_run(
        cluster, unique("ui/traced"), [step(1, "a", 0, 1)], trace=TraceLink(trace_id=TRACE_ID)
    )
    page = open_page(traced)
    page.goto(f"/runs/{run_id}")
    link = page.locator("a.trace")
    expect(link).to_have_count(1)
    expected = HOSTILE_TRACE_URL.replace("{trace_id}", TRACE_ID).replace("{run_id}", run_id)
    expect(link).to_have_attribute("href", expected)  # the template's markup stayed inside the attribute
    expect(link).to_have_text(f"trace {TRACE_ID}")
    expect(page.locator("script")).to_have_count(1)  # the page's own ui.js, nothing injected
    plain = open_page(server)
    plain.goto(f"/runs/{run_id}")
    expect(plain.locator("#timeline li.lane")).to_have_count(1)
    expect(plain.locator("a.trace")).to_have_count(0)
    expect(plain.locator("code.trace-id")).to_have_text(TRACE_ID)
