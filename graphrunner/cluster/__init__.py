"""graphrunner on Celery and Redis, by role.

- `transport/`: messages on the broker: the Celery app, envelopes, publishing, the poison guard,
  signing, queues and remote control.
- `runs/`: what producers and workers share: the `Cluster` connection, run ids, graphs by
  content hash, operations on whole runs (admit, cancel, resume).
- `steps/`: what a worker does with one message: the step executor, the item runner, decisions.
- `waits/`: one module per kind of wait a suspended step keeps, behind one protocol.
- `worker/`: the worker process: the Celery tasks, its runtime, heartbeats, housekeeping, the sweeper.
"""
