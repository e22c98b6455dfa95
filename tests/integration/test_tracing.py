"""One OpenTelemetry trace per run, across two worker processes (issue 26), checked at an OTLP receiver.

The workers export by the standard OTEL_* variables to a receiver the test runs on 127.0.0.1.
The run is submitted inside a span of the producer's own (a private tracer provider, as a web
app's request span would be): its run span must hang under it, and every other span of the
trace under a span of the trace.
"""

from __future__ import annotations

import json
import textwrap
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from otlp_receiver import ReceivedSpan, Receiver, otlp_receiver
from parallel_graphs import folder
from support import settings_of, wait_for
from worker_procs import WorkerProcess, process_env

from graphrunner import load_graph, parse_graph
from graphrunner.client import Client
from graphrunner.embedded import EmbeddedRedis
from graphrunner.settings import Settings

WAIT_S = 90

TRACED = """
id: traced
state:
  n: {type: integer, default: 0}
  xs: {type: list, default: [1, 2, 3]}
  out: {type: list, default: []}
  log: {type: list, default: [], reducer: append}
config: {start: fetch}
nodes:
  fetch:
    action: {tool: echo, params: {n: 1}}
    assign: {n: "${result.n}"}
    next: fan
  fan:
    type: foreach
    over: "${state.xs}"
    as: x
    parallel: true
    queue: QUEUE2
    action: {tool: echo, params: {x: "${x}"}}
    collect: out
    next: both
  both:
    type: parallel
    branches:
      a: {graph: fast, inputs: {query: "${'one'}"}, outputs: {log: log}}
      b: {graph: fast, inputs: {query: "${'two'}"}, outputs: {log: log}}
    next: sub
  sub: {type: subgraph, graph: fast, inputs: {query: "${'three'}"}, next: done}
  done: {type: return, output: "${state.n}"}
"""


COUNTED = """
    id: t/counted
    inputs: {k: {type: integer, required: true}}
    state: {n: {type: integer, default: 0}}
    config: {start: add}
    nodes:
      add:
        action: {tool: echo, params: {n: "${state.n}"}}
        assign: {n: "${result.n + 1}"}
        next: [{to: done, when: "state.n >= inputs.k"}, {to: add}]
      done: {type: return, output: "${state.n}"}
"""


@dataclass(frozen=True)
class Traced:
    client: Client
    receiver: Receiver
    queue2: str
    logs: Path  # the first worker's log: JSON lines


@pytest.fixture(scope="module")
def traced_workers(redis_server: EmbeddedRedis, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Traced]:
    """Two worker processes exporting to a test receiver: one on the client's queue, one on a
    second queue (the foreach `fan` and its items go there), so both take steps of the run."""
    worker_env, tmp_path = process_env(redis_server.url), tmp_path_factory.mktemp("traced")
    queue, queue2 = f"q-{uuid.uuid4().hex[:8]}", f"q2-{uuid.uuid4().hex[:8]}"
    with otlp_receiver() as receiver:
        otel = {
            "OTEL_TRACES_EXPORTER": "otlp",
            "OTEL_METRICS_EXPORTER": "otlp",
            "OTEL_METRIC_EXPORT_INTERVAL": "300",
            "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url,
            "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
            "OTEL_BSP_SCHEDULE_DELAY": "100",
            "OTEL_SERVICE_NAME": "graphrunner-test-worker",
        }
        logs = {"GRAPHRUNNER_LOG_FORMAT": "json"}
        workers = [
            WorkerProcess(name, {**worker_env, **otel, **logs, "GRAPHRUNNER_QUEUE": q}, tmp_path)
            for name, q in (("w1", queue), ("w2", queue2))
        ]
        client = Client(settings=settings_of(redis_url=redis_server.url, queue=queue))
        try:
            for worker in workers:
                worker.wait_ready()
            yield Traced(client, receiver, queue2, workers[0].log)
        finally:
            client.close()
            for worker in workers:
                worker.stop()


def test_a_run_on_two_workers_is_one_trace_under_the_producers_span(
    traced_workers: Traced, tmp_path: Path
) -> None:
    client, receiver, queue2 = traced_workers.client, traced_workers.receiver, traced_workers.queue2
    path = folder(tmp_path) / "traced.yaml"
    path.write_text(textwrap.dedent(TRACED).replace("QUEUE2", queue2))
    graph = load_graph(path, settings=Settings(graph_path=(tmp_path,)))
    producer = TracerProvider().get_tracer("the producer's web app")
    with producer.start_as_current_span("POST /orders") as request:
        handle = client.submit(graph)
    result = handle.wait(timeout=WAIT_S)
    assert result.status == "completed", result.error
    context = request.get_span_context()
    trace_id, request_id = format(context.trace_id, "032x"), format(context.span_id, "016x")

    def whole() -> bool:  # every step's span and the run's own span have arrived (each pool
        # process exports its own batches: the first step's may come after the last one's)
        names = [s.name for s in receiver.trace(trace_id)]
        steps = {"openarmature.invocation", "fetch", "fan", "both", "sub", "done"}
        return steps <= set(names) and names.count("write") == 3

    wait_for(whole, WAIT_S, "the run's spans at the receiver")
    spans = receiver.trace(trace_id)
    by_id = {s.span_id: s for s in spans}
    assert len(by_id) == len(spans), "a span id was used twice"
    [root] = [s for s in spans if s.parent_id == request_id]
    assert (root.name, root.status) == ("openarmature.invocation", "OK")
    assert root.attributes["openarmature.invocation_id"] == handle.id
    assert root.attributes["openarmature.graph.entry_node"] == "fetch"
    orphans = [s for s in spans if s is not root and s.parent_id not in by_id]
    assert not orphans, f"spans whose parent is not in the trace: {[(s.name, s.parent_id) for s in orphans]}"
    steps = [
        s
        for s in spans
        if "graphrunner.phase" in s.attributes and "graphrunner.wait.kind" not in s.attributes
    ]
    assert {s.name for s in steps if s.parent_id == root.span_id} == {"fetch", "fan", "both", "sub", "done"}
    assert all(s.attributes["openarmature.node.name"] == s.name for s in steps)
    instances = {s.resource["service.instance.id"] for s in steps}
    assert len(instances) == 2, f"the steps were taken by {instances}: one worker only"
    _check_fan_out(spans, by_id, root)
    _check_children(spans, by_id, root)


def test_otlp_metrics_count_the_step_tasks_the_traces_show(traced_workers: Traced, tmp_path: Path) -> None:
    graph = parse_graph(textwrap.dedent(COUNTED))
    handles = [traced_workers.client.submit(graph, {"k": k}) for k in (1, 2, 3)]
    assert all(h.wait(timeout=WAIT_S).status == "completed" for h in handles)
    receiver = traced_workers.receiver

    def step_spans() -> int:
        with receiver.lock:
            return sum(1 for s in receiver.spans if s.attributes.get("graphrunner.graph.id") == "t/counted"
                       and "graphrunner.outcome" in s.attributes)  # fmt: skip

    def counted() -> int:  # the latest cumulative point of each worker process, per attribute set
        with receiver.lock:
            latest = {
                (p.resource["service.instance.id"], tuple(sorted(p.attributes.items()))): p.value
                for p in receiver.points
                if p.metric == "graphrunner.steps" and p.attributes.get("graph") == "t/counted"
            }
        return int(sum(latest.values()))

    wait_for(
        lambda: step_spans() >= 9 and counted() == step_spans(), WAIT_S, "the steps counted at the receiver"
    )
    with receiver.lock:
        nodes = {
            p.attributes["node"]
            for p in receiver.points
            if p.metric == "graphrunner.steps" and p.attributes.get("graph") == "t/counted"
        }
        finished = {
            p.attributes["status"]
            for p in receiver.points
            if p.metric == "graphrunner.runs.finished" and p.attributes.get("graph") == "t/counted"
        }
    assert nodes == {"add", "done"} and finished == {"completed"}


def test_a_worker_log_line_of_a_step_leads_to_its_trace_and_span(traced_workers: Traced) -> None:
    graph = parse_graph(
        "id: t/traced-boom\nconfig: {start: boom}\nnodes:\n  boom: {action: {tool: fail, params: {message: nope}}}\n"
    )
    handle = traced_workers.client.submit(graph)
    assert handle.wait(timeout=WAIT_S).status == "failed"
    trace_id = traced_workers.client.store.load_run(handle.id).trace.trace_id

    def logged() -> list[dict[str, Any]]:
        lines = traced_workers.logs.read_text(errors="replace").splitlines()
        records = [json.loads(line) for line in lines if line.startswith("{")]
        return [r for r in records if r.get("run_id") == handle.id and "failed" in r.get("message", "")]

    wait_for(lambda: bool(logged()), WAIT_S, "the failed step's log line")
    [line] = logged()
    assert (line["step"], line["node"], line["trace_id"]) == (1, "boom", trace_id)
    wait_for(
        lambda: any(s.name == "boom" for s in traced_workers.receiver.trace(trace_id)),
        WAIT_S,
        "the step's span",
    )
    [span] = [s for s in traced_workers.receiver.trace(trace_id) if s.name == "boom"]
    assert line["span_id"] == span.span_id and span.status == "ERROR"


def _children(spans: list[ReceivedSpan], parent: ReceivedSpan) -> list[ReceivedSpan]:
    return [s for s in spans if s.parent_id == parent.span_id]


def _check_fan_out(spans: list[ReceivedSpan], by_id: dict[str, ReceivedSpan], root: ReceivedSpan) -> None:
    [fan_out] = [s for s in _children(spans, root) if s.attributes.get("graphrunner.wait.kind") == "foreach"]
    assert fan_out.name == "fan" and fan_out.attributes["openarmature.fan_out.item_count"] == 3
    items = _children(spans, fan_out)
    assert sorted(s.attributes["openarmature.node.fan_out_index"] for s in items) == [0, 1, 2]
    assert {s.name for s in items} == {"fan"}


def _check_children(spans: list[ReceivedSpan], by_id: dict[str, ReceivedSpan], root: ReceivedSpan) -> None:
    waits = [
        s for s in _children(spans, root) if s.attributes.get("graphrunner.wait.kind") in ("kids", "child")
    ]
    assert {s.name for s in waits} == {"both", "sub"}
    assert all(
        s.attributes["openarmature.parallel_branches.branch_count"] == 2 for s in waits if s.name == "both"
    )
    runs = {c.name: c for w in waits for c in _children(spans, w)}  # the child runs' spans
    assert set(runs) == {"a", "b", "sub"}
    assert by_id[runs["a"].parent_id].name == "both" and by_id[runs["sub"].parent_id].name == "sub"
    assert runs["a"].attributes["openarmature.node.branch_name"] == "a"
    assert runs["a"].attributes["openarmature.parallel_branches.parent_node_name"] == "both"
    assert runs["sub"].attributes["openarmature.subgraph.name"] == "fast"
    for name, parent_node in (("a", "both"), ("b", "both"), ("sub", "sub")):  # each child's step: under it
        [write] = _children(spans, runs[name])
        assert write.name == "write"
        assert write.attributes["openarmature.node.namespace"] == [parent_node, "write"]
