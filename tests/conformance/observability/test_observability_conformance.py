"""Every observability fixture (tests/conformance/observability/fixtures), run in-process and on
the cluster, its spans matched against the span tree it expects (README.md in this folder).

Graphs are OpenArmature's fixture graphs translated by `conformance_fixtures` (a node written
`graphrunner: {...}` is taken as it is). Each fixture runs `invocations` times per mode, under a
span of the test's own when it names one (`within_span`); the in-process runs' spans are all
there when `invoke` returns, the cluster's arrive as its tasks end, so that mode waits for the
tree to match (the suite's `wait_for`) and fails with the difference when it does not.
"""

from __future__ import annotations

import contextlib
import logging
import re
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from conformance_fixtures import Case, collect_id, write_graphs
from observability_targets import LOGGER
from opentelemetry import trace
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from span_trees import Node, mismatch, outline, run_span, shape, trace_of
from support import wait_for

from graphrunner import RunResult, load_graph
from graphrunner.client import Client
from graphrunner.graph import Graph
from graphrunner.telemetry import logs

FIXTURES = Path(__file__).resolve().parent / "fixtures"
GRAPH_KEYS = ("state", "entry", "nodes", "edges", "subgraphs", "subgraph")
SESSION = uuid.uuid4().hex[:8]
WAIT_S = 30


@dataclass(frozen=True)
class Fixture:
    """One case of a fixture file: its graph and how to run it, and what its spans must be."""

    id: str
    case: Case
    expected: dict[str, Any]
    run_id: str | None = None  # the caller's run id (OA's caller-supplied invocation / correlation id)
    invocations: int = 1
    within_span: str | None = None  # run it under a span of the test's own, of this name
    modes: tuple[str, ...] = ("in_process", "cluster")

    def want(self, mode: str, key: str) -> Any:
        """What is expected in `mode`: its own (where the cluster's waits make it differ), else the
        fixture's."""
        return (self.expected.get(mode) or {}).get(key, self.expected.get(key))


def load_fixtures() -> list[Fixture]:
    """Every case of every fixture file, in file order."""
    found = []
    for path in sorted(FIXTURES.glob("*.yaml")):
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
        for entry in doc.get("cases") or [doc]:
            merged = {**doc, **entry}
            name = f"{path.stem}[{entry['name']}]" if "cases" in doc else path.stem
            graph = {k: merged[k] for k in GRAPH_KEYS if k in merged}
            found.append(
                Fixture(
                    id=name,
                    case=Case(id=name, graph=graph, initial_state=merged.get("initial_state") or {}),
                    expected=merged["expected"],
                    run_id=merged.get("run_id"),
                    invocations=merged.get("invocations", 1),
                    within_span=merged.get("within_span"),
                    modes=tuple(merged.get("modes") or ("in_process", "cluster")),
                )
            )
    return found


def write_fixture(fixture: Fixture, folder: Path) -> Path:
    """The fixture's graph files in `folder`; a node written `graphrunner: {...}` replaces its
    translation (keeping the `next` its edges gave it)."""
    prefix = f"obs-{SESSION}-{re.sub(r'[^a-z0-9]+', '-', fixture.id.lower())}"
    main = write_graphs(fixture.case, folder, prefix)
    bodies = {main.stem: fixture.case.graph}
    subgraphs = dict(fixture.case.graph.get("subgraphs") or {})
    if "subgraph" in fixture.case.graph:
        subgraphs[fixture.case.graph["subgraph"]["name"]] = fixture.case.graph["subgraph"]
    for name, body in subgraphs.items():
        bodies[f"{prefix}-{name}"] = body
        for path in folder.glob(f"{collect_id(f'{prefix}-{name}', '')}*.yaml"):
            bodies[path.stem] = body
    for stem, body in bodies.items():
        _take_as_is(folder / f"{stem}.yaml", body)
    return main


def _take_as_is(path: Path, body: dict[str, Any]) -> None:
    raw = {name: spec["graphrunner"] for name, spec in body["nodes"].items() if "graphrunner" in (spec or {})}
    if not raw:
        return
    graph = yaml.safe_load(path.read_text(encoding="utf-8"))
    for name, node in raw.items():
        translated = graph["nodes"][name]
        graph["nodes"][name] = {**node, **({"next": translated["next"]} if "next" in translated else {})}
    path.write_text(yaml.safe_dump(graph, sort_keys=False), encoding="utf-8")


FIXTURE_LIST = load_fixtures()
PARAMS = [
    pytest.param(f, mode, id=f"{f.id}-{mode}", marks=[pytest.mark.integration] if mode == "cluster" else [])
    for f in FIXTURE_LIST
    for mode in f.modes
]


@contextmanager
def captured_logs() -> Iterator[list[logging.LogRecord]]:
    """The records the fixtures' targets log, each with the ids a worker's log filter gives it."""
    kept: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            kept.append(record)

    handler, logger = Keep(), logging.getLogger(LOGGER)
    handler.addFilter(logs.ContextFilter())
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        yield kept
    finally:
        logger.removeHandler(handler)


@pytest.mark.parametrize(("fixture", "mode"), PARAMS)
def test_fixture(
    fixture: Fixture,
    mode: str,
    tmp_path: Path,
    exported: InMemorySpanExporter,
    request: pytest.FixtureRequest,
) -> None:
    graph = load_graph(write_fixture(fixture, tmp_path))
    client = request.getfixturevalue("cluster") if mode == "cluster" else None
    shapes, correlations = [], set()
    with captured_logs() as records:
        for n in range(fixture.invocations):
            run_id = fixture.run_id and (
                fixture.run_id if fixture.invocations == 1 else f"{fixture.run_id}-{n}"
            )
            result = invoke(graph, client, run_id, fixture.within_span)
            assert result.status == fixture.expected.get("status", "completed"), result.error
            assert run_id is None or result.run_id == run_id
            roots = spans_of(fixture, mode, result.run_id, exported)
            check_trees(fixture, mode, roots, result.run_id)
            check_logs(fixture, roots, records, result.run_id)
            shapes.append(shape(roots))
            correlations |= {s.attributes.get("openarmature.correlation_id") for r in roots for s in r.walk()}
    if fixture.expected.get("deterministic"):  # OA §10: the same spans but ids and times
        assert all(s == shapes[0] for s in shapes), "two runs of the same graph gave different spans"
    if fixture.expected.get("distinct_correlation_ids"):  # OA 009: a fresh id per invocation
        assert len(correlations - {None}) == fixture.invocations, correlations


def invoke(graph: Graph, client: Client | None, run_id: str | None, within: str | None) -> RunResult:
    """Run `graph` once, in-process or on the cluster, under a span named `within` when given."""
    tracer = trace.get_tracer("the caller's application")
    with tracer.start_as_current_span(within) if within else nullcontext():
        if client is None:
            return graph.invoke_sync(run_id=run_id)
        handle = client.submit(graph, run_id=run_id)
    return handle.wait(timeout=WAIT_S)


def spans_of(fixture: Fixture, mode: str, run_id: str, exported: InMemorySpanExporter) -> list[Node]:
    """The run's trace: at once in-process; on the cluster once it matches (or at the deadline)."""
    expected = fixture.want(mode, "span_tree")
    if mode == "cluster":
        with contextlib.suppress(TimeoutError):  # check_trees says what differs
            wait_for(lambda: mismatch(expected, trace_of(exported.get_finished_spans(), run_id), run_id) is None,
                     WAIT_S, f"the spans of run {run_id}")  # fmt: skip
    assert run_span(exported.get_finished_spans(), run_id) is not None, f"no run span for {run_id}"
    return trace_of(exported.get_finished_spans(), run_id)


def check_trees(fixture: Fixture, mode: str, roots: list[Node], run_id: str) -> None:
    """The trace is the expected tree; with `correlation_id_uniform`, every span says the run's id."""
    problem = mismatch(fixture.want(mode, "span_tree"), roots, run_id)
    assert problem is None, f"{problem}\n\nthe trace:\n{outline(roots)}"
    if fixture.want(mode, "correlation_id_uniform"):
        spans = [n for r in roots for n in r.walk() if n.name != fixture.within_span]
        missing = [n.name for n in spans if n.attributes.get("openarmature.correlation_id") != run_id]
        assert not missing, f"spans without the correlation id {run_id}: {missing}"


def check_logs(fixture: Fixture, roots: list[Node], records: list[logging.LogRecord], run_id: str) -> None:
    """Each expected line was logged with the run's id, its trace id and its node's step span's id."""
    for want in fixture.expected.get("log_records") or []:
        [record] = [r for r in records if r.getMessage() == want["message"] and r.run_id == run_id]
        steps = [s for r in roots for s in r.walk() if "openarmature.node.step" in s.attributes]
        [step] = [s for s in steps if s.name == want["node"]]
        context = step.span.context
        assert context is not None
        ids = {k: getattr(record, k) for k in ("trace_id", "span_id", "node")}
        assert ids == {
            "trace_id": f"{context.trace_id:032x}",
            "span_id": f"{context.span_id:016x}",
            "node": want["node"],
        }
