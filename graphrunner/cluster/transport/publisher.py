"""The sending side of the cluster: how a message gets from a commit to the broker.

Every message that carries a run forward goes through the store first, in the same atomic
write as the change it follows (a transactional outbox):

- the broker is the store's own Redis (`direct`): the store's script pushes the kombu
  envelope onto the queue itself; nothing is left to publish;
- another Redis broker: the envelope is committed to the run's outbox, then pushed onto the
  broker's queue (`flush`) and trimmed from the outbox;
- any other broker (RabbitMQ): the message is committed to the outbox, then published by
  Celery (`send_task`).

A worker that dies between commit and publish leaves the message in the outbox, where the
sweeper finds it and publishes it again. Durable timers (retry backoffs, durable sleeps,
polls) are sent the same way with a due time; `pump` moves the due ones onto their queues.
Foreach items are sent after the commit that suspends their step (`fan_out`), outside any
outbox: the sweeper sends the items of a chunk again when they do not come back.
"""

from __future__ import annotations

import itertools
import time
import uuid
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from graphrunner.cluster.transport.broker import Broker, MemoryBroker, RedisBroker
from graphrunner.cluster.transport.deadline import WATCHDOG, cut
from graphrunner.cluster.transport.envelope import SENT_HEADER, Envelope
from graphrunner.cluster.transport.messages import ITEM_TASK, STEP_TASK, Outgoing
from graphrunner.cluster.transport.signing import Signer
from graphrunner.compiled import CompiledGraph
from graphrunner.engine import ParentLink, RunSnapshot
from graphrunner.errors import BrokerUnavailable
from graphrunner.settings import Settings
from graphrunner.store import Gather, Send, Store
from graphrunner.store.memory_store import MemoryStore

if TYPE_CHECKING:
    from celery import Celery

FAN_OUT_SLICE = 50  # foreach item messages encoded and pushed at a time (about 2.5 KB each)
PUBLISH_RETRY = {"max_retries": 10, "interval_start": 0.1, "interval_step": 0.5, "interval_max": 3}
# RabbitMQ under a memory or disk alarm blocks publishers: a publish waits for its confirm, and
# kombu then waits to close the channel (celery/celery#9259). Each attempt (the write, then the
# confirm) is bounded, retries stop once the publish has taken PUBLISH_DEADLINE, and a publish
# still blocked PUBLISH_TIMEOUT after that has its connection cut (`deadline.cut`). A publish that
# gave up that way makes the next ones fail at once for PUBLISH_TIMEOUT (a sweeper pass over many
# stalled runs then takes seconds, not 15 s a run); their messages wait in their outboxes.
PUBLISH_TIMEOUT = 5.0  # seconds one attempt may take
PUBLISH_DEADLINE = 15.0  # seconds a publish may take, its retries included


def is_redis_url(url: str | None) -> bool:
    """The URL names a Redis server (a broker graphrunner can push envelopes onto)."""
    return bool(url) and str(url).split("://", 1)[0] in ("redis", "rediss", "unix")


def broker_for(settings: Settings, store: Store) -> Broker | None:
    """The queues the cluster's messages go to: a MemoryStore's own (they hold `Outgoing`s), the
    store's Redis when it is the broker, another Redis broker; None for any other broker (Celery
    publishes there, and nothing can be looked for)."""
    if isinstance(store, MemoryStore):
        return MemoryBroker(store)
    client = getattr(store, "redis", None)
    if store.direct and client is not None:
        return RedisBroker(client)
    broker_url = settings.broker
    if not store.direct and broker_url is not None and is_redis_url(broker_url):
        return RedisBroker.from_url(broker_url)
    return None


class Publisher:
    """Encodes, commits-to-send and publishes the cluster's messages (see the module docstring)."""

    def __init__(self, settings: Settings, store: Store, *, app: Celery | None = None) -> None:
        self.settings = settings
        self.store = store
        self._app = app
        self._own_app: Celery | None = None  # made here, closed here
        self.envelope = Envelope()
        self.broker = broker_for(settings, store)
        self._signer: Signer | None = None
        self._quiet_until = 0.0  # a broker that kept a publish waiting for its whole deadline: not until then

    @property
    def signer(self) -> Signer:
        """The cluster's signer of item messages (its key read when first needed)."""
        if self._signer is None:
            self._signer = Signer.of(self.settings, self.store)
        return self._signer

    @property
    def app(self) -> Celery:
        """The Celery app that publishes chords (and everything, on a broker that is not Redis)."""
        if self._app is None:
            from graphrunner.cluster.transport.app import create_app

            self._app = self._own_app = create_app(self.settings)
        return self._app

    # -- what to send -----------------------------------------------------------------------------

    def queue_of(self, graph: CompiledGraph | None, node: str | None) -> str:
        """The queue of a step at `node`: the node's own `queue`, else the default one."""
        spec = graph.spec.nodes.get(node or "") if graph is not None else None
        return getattr(spec, "queue", None) or self.settings.queue

    def step(
        self,
        snap: RunSnapshot,
        graph: CompiledGraph | None,
        *,
        due: float | None = None,
        tracked: bool = True,
    ) -> Outgoing:
        """The message that takes (or goes on with) the step after `snap`, routed after its node."""
        args = [snap.run_id, snap.step, snap.phase] if snap.phase else [snap.run_id, snap.step]
        shadow = f"{snap.graph_id}:{snap.node or ''}"
        return Outgoing(
            task=STEP_TASK,
            args=tuple(args),
            queue=self.queue_of(graph, snap.node),
            shadow=shadow,
            due=due,
            tracked=tracked,
        )

    def wake(self, parent: ParentLink, child: str = "") -> Outgoing:
        """The message that wakes the parent's step `parent` whose child `child` has finished
        (named, so a parent waiting on many kids looks at that one only), gathered: `child` joins
        the step's ended set and the message goes only when no wake-up of the step is pending
        (`store.Gather`), so kids that end close together wake their parent once.

        Flower shows it as `graph:node:child-finished`: one name per node, never one per run
        (a parent recorded before the names were kept shows as `child-finished`).
        """
        args: tuple[Any, ...] = (parent.run_id, parent.step, parent.phase)
        if child:
            args = (*args, child)
        where = f"{parent.graph_id}:{parent.node or ''}:" if parent.graph_id else ""
        return Outgoing(
            task=STEP_TASK,
            args=args,
            queue=self.settings.queue,
            shadow=f"{where}child-finished",
            gather=(parent.run_id, parent.step, child, self.settings.stall_after),
        )

    def join(self, run_id: str, step: int, phase: int, queue: str, shadow: str) -> Outgoing:
        """The message that goes on with the step after `step` steps of run `run_id`, suspended at
        `phase` (a foreach chunk's join, sent by the item task that recorded its last item)."""
        return Outgoing(task=STEP_TASK, args=(run_id, step, phase), queue=queue, shadow=shadow)

    def item(self, payload: dict[str, Any], queue: str, shadow: str, due: float | None = None) -> Outgoing:
        """The message of one foreach item, signed (sent again later: a retry or a durable sleep)."""
        return Outgoing(
            task=ITEM_TASK, args=(self.signer.sign(payload),), queue=queue, shadow=shadow, due=due
        )

    def encode(self, out: Outgoing) -> Send:
        """`out` as the store sends it: a kombu envelope for a Redis broker, else the message itself."""
        if isinstance(self.broker, RedisBroker):
            tag, body = self.envelope.encode(out)
        else:
            tag, body = str(uuid.uuid4()), out.model_dump_json()
        gather = Gather(*out.gather) if out.gather is not None else None
        return Send(out.queue, body, tag, due=out.due, tracked=out.tracked, gather=gather)

    def encode_all(self, outs: Iterable[Outgoing]) -> list[Send]:
        """`encode` each message."""
        return [self.encode(o) for o in outs]

    # -- sending ---------------------------------------------------------------------------------------

    def send(self, run_id: str, outs: Sequence[Outgoing]) -> None:
        """Send messages no commit carries (the run `run_id` records the tracked one)."""
        if not outs:
            return
        self.store.push(self.encode_all(outs), run_id)
        self.flush(run_id)

    def flush(self, run_id: str, committed: Sequence[Send] = ()) -> int:
        """Publish messages of the run's outbox (nothing to do when direct); how many were published.

        A commit passes the messages it put there (`committed`) and publishes exactly those: the
        next step may commit (and publish its own) before this one is done, so whatever else the
        outbox holds is another publisher's, or a dead one's, left to the sweeper (which passes
        nothing and publishes all). Each published message is dropped from the outbox by its
        entry, never by position: a message another commit put there meanwhile stays.
        """
        if self.store.direct:
            return 0
        pending = [s for s in committed if s.gather is None] if committed else self.store.outbox(run_id)
        gathered = {s.tag for s in committed if s.gather is not None}
        if gathered:  # a gathered wake-up is in the outbox only when none was pending
            pending += [s for s in self.store.outbox(run_id) if s.tag in gathered]
        for send in pending:
            self.publish(send)
        self.store.drop_outbox(run_id, pending)
        return len(pending)

    def publish(self, send: Send) -> None:
        """Put one encoded message on the broker (outside a commit); raises `BrokerUnavailable`
        naming the broker when it refuses the login or cannot be reached."""
        if self.broker is not None:
            self.broker.push(send.queue, send.body)
            return
        started = time.monotonic()
        if started < self._quiet_until:
            raise self._unavailable("it kept the last one waiting until its publish gave up, moments ago")
        try:
            self._publish_all([Outgoing.model_validate_json(send.body)])
        except Exception as exc:  # kombu/amqp raise their own trees: refused login, lost connection
            # kept waiting (blocked), not refused at once: do not wait on it again straight away
            if time.monotonic() - started >= PUBLISH_TIMEOUT:
                self._quiet_until = time.monotonic() + PUBLISH_TIMEOUT
            raise self._unavailable(f"{type(exc).__name__}: {exc}") from exc

    def _unavailable(self, why: str) -> BrokerUnavailable:
        from kombu.utils.url import maybe_sanitize_url

        broker = maybe_sanitize_url(self.settings.broker or "")
        return BrokerUnavailable(
            f"the broker {broker} (GRAPHRUNNER_BROKER_URL) did not take a message: {why}; it stays "
            "in the run's outbox and the sweeper sends it once the broker takes it"
        )

    def pump(self, now: float, limit: int = 100) -> int:
        """Move durable timers due by `now` onto their queues; how many were taken.

        On the store's own Redis the store's script pushes them (atomic). On another Redis they
        are published (the sweeper sees a message that did not get there: `Broker.lost`).
        RabbitMQ can be away for longer than a publish retries, and nothing can be looked for
        on it: each timer goes into its run's outbox first, then the outboxes are published; a
        broker that is away (or a worker that dies meanwhile) leaves them there for the sweeper.
        """
        taken = self.store.pump_timers(now, limit)
        if self.store.direct:
            return len(taken)
        if self.broker is not None:
            for send in taken:
                self.publish(send)
            return len(taken)
        self._through_outboxes(taken)
        return len(taken)

    def _through_outboxes(self, taken: Sequence[Send]) -> None:
        runs: dict[str, list[Send]] = {}
        for send in taken:
            run_id = _run_of(send)
            if run_id is None:  # names no run (none of graphrunner's): published as it is
                self.publish(send)
                continue
            runs.setdefault(run_id, []).append(Send(send.queue, send.body, str(uuid.uuid4())))
        for run_id, sends in runs.items():
            self.store.push(sends, run_id)  # into its outbox: one write per run
        for run_id in runs:
            self.flush(run_id)  # raises when the broker is away: the rest wait in their outboxes

    def fan_out(self, items: Iterable[Outgoing]) -> int:
        """Send foreach item messages now, `FAN_OUT_SLICE` at a time (never all of a chunk encoded at
        once): onto a Redis broker's queues with one push per queue and slice, else published by
        Celery over one producer; how many were sent."""
        sent, pending = 0, iter(items)
        while part := list(itertools.islice(pending, FAN_OUT_SLICE)):
            if self.broker is not None:
                queues: dict[str, list[str]] = {}
                for out in part:
                    queues.setdefault(out.queue, []).append(self.encode(out).body)
                for queue, bodies in queues.items():
                    self.broker.push_many(queue, bodies)
            else:
                self._publish_all(part)
            sent += len(part)
        return sent

    def _publish_all(self, outs: Sequence[Outgoing]) -> None:
        """Publish `outs` through Celery over one producer (a broker that is not Redis), each within
        `PUBLISH_DEADLINE`; a publish that fails or overruns leaves its connection to be replaced."""
        app = self.app
        with app.producer_or_acquire() as producer:
            connection = producer.connection
            try:
                for out in outs:
                    with WATCHDOG.watch(PUBLISH_DEADLINE + PUBLISH_TIMEOUT, lambda: cut(connection)):
                        self._send(app, out, producer)
            except BaseException:
                connection.collect()  # no network: a blocked connection and channel are dropped, not closed
                raise

    @staticmethod
    def _send(app: Celery, out: Outgoing, producer: Any = None) -> None:
        """Publish `out` through Celery (`send_task`: no signature or task object in between), with
        the `gr_sent` header of a message sent now; retried as `PUBLISH_RETRY` says, for at most
        `PUBLISH_DEADLINE` seconds."""
        app.send_task(
            out.task,
            args=list(out.args),
            queue=out.queue,
            shadow=out.shadow,
            ignore_result=True,
            retry=True,
            retry_policy={**PUBLISH_RETRY, "errback": _give_up_after(PUBLISH_DEADLINE)},
            headers={SENT_HEADER: int(time.time() * 1000)},
            producer=producer,
            timeout=PUBLISH_TIMEOUT,
            confirm_timeout=PUBLISH_TIMEOUT,
        )

    def close(self) -> None:
        """Release the broker connections this publisher opened."""
        if self._own_app is not None:
            self._own_app.close()
        if self.broker is not None and not self.store.direct:
            self.broker.close()


def _give_up_after(seconds: float) -> Any:
    """A kombu retry errback that stops the retries once `seconds` have passed (raises the error)."""
    until = time.monotonic() + seconds

    def errback(exc: Exception, interval: float) -> None:
        if time.monotonic() + interval > until:
            raise exc

    return errback


def _run_of(send: Send) -> str | None:
    """The run a timer's message belongs to (a step's first argument, an item's `run_id`)."""
    try:
        first = Outgoing.model_validate_json(send.body).args[0]
    except (ValidationError, IndexError):
        return None
    if isinstance(first, dict):
        first = first.get("run_id")
    return first if isinstance(first, str) else None
