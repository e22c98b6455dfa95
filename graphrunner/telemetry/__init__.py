"""Observability (DESIGN §11): traces, metrics and log correlation, by the `OTEL_*` variables.

- `propagation`: the producer's side, OpenTelemetry API only: the `TraceLink` a new run keeps
  (its trace, under the producer's current span or a `traceparent`).
- `ids`, `spans`: the worker's side: the span ids every task derives from a run's `TraceLink`,
  and the spans a step, an item, a wait and a run's end emit.
- `metrics`, `prometheus`: steps, runs, items, retries, redeliveries, dead letters, repairs and
  timers, as OpenTelemetry instruments and on a worker's Prometheus endpoint.
- `logs`: worker log records carrying run, step, node, trace and span ids; JSON lines.
- `sdk`: the SDK set up from the environment, only in the processes that are graphrunner's own
  (a worker process after Celery's fork, `graphrunner run`, `graphrunner ui`); never in a
  producer's process.
"""
