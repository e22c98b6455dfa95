"""While a command waits for a run: one warning on stderr when no worker consumes the run's queue.

A thread looks at the run's record once a second (one round trip). When the run has been
running for `STILL_FOR` seconds without a commit, it asks the workers which queues they
consume (Celery's remote control, `ASK_FOR` seconds) for the queue the run's step was sent
to, once per queue. A worker that is busy answers all the same, so a long step, or a run
queued behind others, is no reason to warn. Nothing here ever fails the command.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from graphrunner.client import Client

STILL_FOR = 3.0  # seconds a running run goes without a commit before its queue is looked at
LOOK_EVERY = 1.0
ASK_FOR = 2.0  # seconds the workers have to say which queues they consume


@contextmanager
def no_worker_warning(client: Client, run_id: str) -> Iterator[None]:
    """While the block runs, warn once per queue when the run waits on a queue no worker consumes."""
    stop = threading.Event()
    watcher = threading.Thread(
        target=_watch, args=(client, run_id, stop), name="graphrunner-no-worker", daemon=True
    )
    watcher.start()
    try:
        yield
    finally:
        stop.set()
        watcher.join(ASK_FOR + LOOK_EVERY)  # at once, unless it is asking the workers right now


def no_worker_message(client: Client, queue: str, answered: bool) -> str:
    """`no worker is consuming queue 'graphrunner' on redis://...: start one with ...`."""
    from kombu.utils.url import maybe_sanitize_url

    where = maybe_sanitize_url(client.settings.broker or "")
    start = "graphrunner worker" if queue == client.settings.queue else f"graphrunner worker -Q {queue}"
    others = " (the workers that answered consume other queues)" if answered else ""
    return (
        f"warning: no worker is consuming queue '{queue}' on {where}{others}: start one with "
        f"`{start}`; still waiting"
    )


def _watch(client: Client, run_id: str, stop: threading.Event) -> None:
    try:
        _look(client, run_id, stop)
    except Exception:  # Redis or the broker went away, the client was closed: not this thread's to say
        return


def _look(client: Client, run_id: str, stop: threading.Event) -> None:
    asked: set[str] = set()
    seen: tuple[str, ...] = ()
    since = time.monotonic()
    while not stop.is_set():
        fields = client.store.run_fields(run_id)
        status = fields.get("status")
        if status not in ("pending", "running"):
            return  # gone, settled: the command is about to say so
        mark = (status, fields.get("step", ""), fields.get("updated_at", ""))
        if mark != seen:
            seen, since = mark, time.monotonic()
        elif status == "running" and time.monotonic() - since >= STILL_FOR:
            _ask(client, run_id, asked, stop)
        stop.wait(LOOK_EVERY)


def _ask(client: Client, run_id: str, asked: set[str], stop: threading.Event) -> None:
    """Ask the workers about the queue the run's step waits on (once per queue); warn if none takes it."""
    from graphrunner.cluster.transport.control import consumers

    sent = client.store.sent(run_id)
    queue = sent.queue if sent is not None else client.settings.queue
    if queue in asked:
        return
    asked.add(queue)
    found = consumers(client.cluster.publisher.app, queue, ASK_FOR)
    if not found and not stop.is_set():
        click.echo(no_worker_message(client, queue, answered=found is not None), err=True)
