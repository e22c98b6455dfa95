"""Configuration from `GRAPHRUNNER_*` environment variables, read in this one place."""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path
from urllib.parse import urlsplit

from graphrunner.errors import ConfigurationError

SINGLE_REDIS = ("redis://", "rediss://", "unix://")
CLUSTER_SCHEMES = {"redis+cluster": "redis", "rediss+cluster": "rediss"}  # and the scheme of each node

QUEUE_TYPES = ("classic", "quorum")  # GRAPHRUNNER_QUEUE_TYPE
LOG_FORMATS = ("text", "json")  # GRAPHRUNNER_LOG_FORMAT
AMQP_SCHEMES = ("amqp", "amqps", "pyamqp", "pyamqps", "librabbitmq")
RABBITMQ_CONSUMER_TIMEOUT = 1800  # seconds: RabbitMQ's default `consumer_timeout` (30 min)
# GRAPHRUNNER_LIVENESS_FILE: under /tmp, the one writable path (a tmpfs) of a read-only image
LIVENESS_FILE = Path("/tmp/graphrunner-worker.alive")

# What a run gets when nobody wrote its capabilities (docs/security.md): a producer's run
# (Client, `graphrunner submit`, an explorer login with none configured) the pure built-ins;
# a local run (in-process, or `graphrunner run` with its own embedded Redis) everything, since
# it runs as the user who started it.
PURE_BUILTINS = ("tool:echo", "tool:fail", "tool:sleep")
LOCAL_CAPABILITIES = ("*",)


def is_cluster_url(url: str) -> bool:
    """Whether `url` names a Redis Cluster (`redis+cluster://` or `rediss+cluster://`)."""
    return url.split("://", 1)[0] in CLUSTER_SCHEMES


def _int(name: str, default: int) -> int:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        return int(raw)
    except ValueError:
        raise ValueError(f"{name} must be a whole number, got {raw!r}") from None


def _non_negative(name: str) -> int:
    value = _int(name, 0)
    if value < 0:
        raise ValueError(f"{name} must be 0 or more, got {value}")
    return value


def _non_negative_or(name: str, default: int) -> int:
    value = _int(name, default)
    if value < 0:
        raise ValueError(f"{name} must be 0 or more, got {value}")
    return value


def _positive(name: str, default: int) -> int:
    value = _int(name, default)
    if value < 1:
        raise ValueError(f"{name} must be at least 1, got {value}")
    return value


def _choice(name: str, choices: tuple[str, ...], default: str) -> str:
    """One of `choices` (case-insensitive); unset or blank is `default`."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    if raw.lower() not in choices:
        raise ValueError(f"{name} must be one of {', '.join(choices)}, got {raw!r}")
    return raw.lower()


def _patterns(name: str, default: tuple[str, ...]) -> tuple[str, ...]:
    """Comma-separated patterns; unset or blank is `default`, `none` is no pattern at all."""
    written = _written_patterns(name)
    return default if written is None else written


def _written_patterns(name: str) -> tuple[str, ...] | None:
    """Comma-separated patterns; None when unset or blank, `none` is no pattern at all."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return None
    if raw.lower() == "none":
        return ()
    return tuple(p.strip() for p in raw.split(",") if p.strip())


def _url_template(name: str, placeholder: str) -> str | None:
    """An http(s) URL template that holds `placeholder`; unset or blank is None."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return None
    parts = urlsplit(raw)
    if parts.scheme.lower() not in ("http", "https") or not parts.netloc:
        raise ValueError(f"{name} must be an http:// or https:// URL, got {raw!r}")
    if placeholder not in raw:
        raise ValueError(f"{name} must contain {placeholder} (where the link puts it), got {raw!r}")
    return raw


def _path(name: str) -> Path | None:
    raw = os.environ.get(name, "").strip()
    return Path(raw) if raw else None


@dataclass(frozen=True)
class Settings:
    """Every setting graphrunner reads from the environment."""

    graph_path: tuple[Path, ...] = ()
    max_graph_bytes: int = 1_048_576
    max_state_bytes: int = 1_048_576  # a run's state (and inputs), JSON-encoded
    default_capabilities: tuple[str, ...] = PURE_BUILTINS  # of a producer's run submitted without any
    local_capabilities: tuple[str, ...] = LOCAL_CAPABILITIES  # of a local run (in-process, embedded)
    quiet: bool = False
    redis_url: str | None = None
    broker_url: str | None = None
    result_backend_url: str | None = None  # Celery's result backend (chord counters); default the Redis
    cluster_shards: int = 16  # shards of the run indexes on a Redis Cluster
    queue: str = "graphrunner"
    queue_type: str = "classic"  # classic | quorum: how RabbitMQ declares graphrunner's queues
    consumer_timeout: int | None = None  # seconds RabbitMQ lets a delivery go unacked (0: no limit)
    visibility_timeout: int = 20  # seconds until a dead worker's messages are delivered again
    prefetch: int = 1
    task_events: bool = False
    fanout_chunk: int = 1000
    cache_ttl: int = 86400
    hooks_file: Path | None = None
    retention: int = 604_800  # seconds a finished run (record, transcript, path) is kept
    history_max_bytes: int = 8_388_608  # a run's kept history (initial state, values too large for
    # its transcript, resume patches), JSON-encoded; past it later steps cannot be read or forked
    stall_after: int = 20  # seconds without progress or heartbeat before the sweeper looks at a run
    sweep_interval: int = 5  # seconds between a worker's sweeper passes (one at a time cluster-wide)
    max_redeliveries: int = 5  # redeliveries of one step (or item) before it is a poison message
    worker_config: str | None = None  # a team's worker configuration: a .py file or a module name
    stop_grace: int | None = None  # seconds the platform grants between SIGTERM and SIGKILL
    rye_tools: str = ""  # Rye ids of registered tools: comma-separated `rye/id=tool_name` pairs
    shell_env_allow: tuple[str, ...] = ()  # worker environment variables (fnmatch) shell steps also get
    http_allow: tuple[str, ...] = ()  # hosts and CIDRs the http tool may reach (empty: any not denied)
    http_deny: tuple[str, ...] = ()  # hosts and CIDRs it may never reach, besides link-local and metadata
    ui_users: Path | None = None  # the run explorer's users file: logins, passwords, capabilities
    signing_key: str | None = None  # the key item messages are signed with (else one kept in Redis)
    log_format: str = "text"  # text | json: how a worker writes its log lines
    trace_url: str | None = None  # the explorer's link to a run's trace: a URL with {trace_id} ({run_id})
    liveness_file: Path = LIVENESS_FILE  # touched by a live worker, read by `graphrunner alive`
    redis_min_replicas: int = 0  # replicas that must acknowledge every commit (Redis WAIT); 0: none
    redis_wait_timeout_ms: int = 1000  # how long a commit waits for them

    @classmethod
    def from_env(cls) -> Settings:
        """Read the settings from `os.environ`."""
        path = os.environ.get("GRAPHRUNNER_GRAPH_PATH", "")
        written = _written_patterns("GRAPHRUNNER_DEFAULT_CAPABILITIES")
        return cls(
            graph_path=tuple(Path(p) for p in path.split(os.pathsep) if p),
            max_graph_bytes=_int("GRAPHRUNNER_MAX_GRAPH_BYTES", cls.max_graph_bytes),
            max_state_bytes=_positive("GRAPHRUNNER_MAX_STATE_BYTES", cls.max_state_bytes),
            default_capabilities=cls.default_capabilities if written is None else written,
            local_capabilities=cls.local_capabilities if written is None else written,
            quiet=os.environ.get("GRAPHRUNNER_QUIET", "") not in ("", "0", "false"),
            redis_url=os.environ.get("GRAPHRUNNER_REDIS_URL") or None,
            broker_url=os.environ.get("GRAPHRUNNER_BROKER_URL") or None,
            result_backend_url=os.environ.get("GRAPHRUNNER_RESULT_BACKEND_URL") or None,
            cluster_shards=_positive("GRAPHRUNNER_CLUSTER_SHARDS", cls.cluster_shards),
            queue=os.environ.get("GRAPHRUNNER_QUEUE") or cls.queue,
            queue_type=_choice("GRAPHRUNNER_QUEUE_TYPE", QUEUE_TYPES, cls.queue_type),
            consumer_timeout=_non_negative("GRAPHRUNNER_CONSUMER_TIMEOUT")
            if os.environ.get("GRAPHRUNNER_CONSUMER_TIMEOUT", "").strip()
            else None,
            visibility_timeout=_int("GRAPHRUNNER_VISIBILITY_TIMEOUT", cls.visibility_timeout),
            prefetch=_int("GRAPHRUNNER_PREFETCH", cls.prefetch),
            task_events=os.environ.get("GRAPHRUNNER_TASK_EVENTS", "") not in ("", "0", "false"),
            fanout_chunk=_int("GRAPHRUNNER_FANOUT_CHUNK", cls.fanout_chunk),
            cache_ttl=_int("GRAPHRUNNER_CACHE_TTL", cls.cache_ttl),
            hooks_file=Path(os.environ["GRAPHRUNNER_HOOKS"]) if os.environ.get("GRAPHRUNNER_HOOKS") else None,
            retention=_positive("GRAPHRUNNER_RETENTION", cls.retention),
            history_max_bytes=_non_negative_or("GRAPHRUNNER_HISTORY_MAX_BYTES", cls.history_max_bytes),
            stall_after=_positive("GRAPHRUNNER_STALL_AFTER", cls.stall_after),
            sweep_interval=_positive("GRAPHRUNNER_SWEEP_INTERVAL", cls.sweep_interval),
            max_redeliveries=_positive("GRAPHRUNNER_MAX_REDELIVERIES", cls.max_redeliveries),
            worker_config=os.environ.get("GRAPHRUNNER_WORKER_CONFIG", "").strip() or None,
            stop_grace=_positive("GRAPHRUNNER_STOP_GRACE", 1)
            if os.environ.get("GRAPHRUNNER_STOP_GRACE")
            else None,
            rye_tools=os.environ.get("GRAPHRUNNER_RYE_TOOLS", "").strip(),
            shell_env_allow=_patterns("GRAPHRUNNER_SHELL_ENV_ALLOW", ()),
            http_allow=_patterns("GRAPHRUNNER_HTTP_ALLOW", ()),
            http_deny=_patterns("GRAPHRUNNER_HTTP_DENY", ()),
            ui_users=_path("GRAPHRUNNER_UI_USERS"),
            signing_key=os.environ.get("GRAPHRUNNER_SIGNING_KEY", "").strip() or None,
            log_format=_choice("GRAPHRUNNER_LOG_FORMAT", LOG_FORMATS, cls.log_format),
            trace_url=_url_template("GRAPHRUNNER_TRACE_URL", "{trace_id}"),
            liveness_file=_path("GRAPHRUNNER_LIVENESS_FILE") or cls.liveness_file,
            redis_min_replicas=_non_negative("GRAPHRUNNER_REDIS_MIN_REPLICAS"),
            redis_wait_timeout_ms=_positive("GRAPHRUNNER_REDIS_WAIT_TIMEOUT_MS", cls.redis_wait_timeout_ms),
        )

    def with_redis(self, url: str) -> Settings:
        """These settings pointed at another Redis (state store, and broker unless one is set)."""
        return replace(self, redis_url=url)

    @property
    def broker(self) -> str | None:
        """The Celery broker URL: GRAPHRUNNER_BROKER_URL, else the Redis URL."""
        return self.broker_url or self.redis_url

    @property
    def clustered(self) -> bool:
        """The state store is a Redis Cluster (`redis+cluster://` or `rediss+cluster://`)."""
        return is_cluster_url(self.redis_url or "")

    def result_backend(self) -> str:
        """The Redis where Celery keeps chord counters (foreach items): GRAPHRUNNER_RESULT_BACKEND_URL,
        else the state store's Redis, else (on a Redis Cluster) a broker that is a Redis;
        raises `ConfigurationError` when there is none."""
        url = self.result_backend_url or (self.broker_url if self.clustered else self.redis_url) or ""
        if url.startswith(SINGLE_REDIS):
            return url
        if self.result_backend_url:
            raise ConfigurationError(
                "GRAPHRUNNER_RESULT_BACKEND_URL must name a single Redis (redis://, rediss:// or unix://): "
                "Celery keeps no chord counters in a Redis Cluster or on a broker"
            )
        raise ConfigurationError(
            "GRAPHRUNNER_RESULT_BACKEND_URL is not set: with a Redis Cluster as the state store and a broker "
            "that is not a Redis, Celery's chord counters (foreach items) need a single Redis of their own; "
            "set GRAPHRUNNER_RESULT_BACKEND_URL=redis://host:port/db"
        )

    @property
    def amqp(self) -> bool:
        """The broker is RabbitMQ (an `amqp://`, `amqps://` or `pyamqp://` URL, as kombu spells them)."""
        return (self.broker or "").split("://", 1)[0] in AMQP_SCHEMES

    @property
    def ack_timeout(self) -> int | None:
        """Seconds the broker lets a message go unacknowledged before it takes it back: on
        RabbitMQ GRAPHRUNNER_CONSUMER_TIMEOUT, else RabbitMQ's default; None: no limit (0, or a
        Redis broker, whose workers vouch for the messages they hold)."""
        if not self.amqp:
            return None
        timeout = RABBITMQ_CONSUMER_TIMEOUT if self.consumer_timeout is None else self.consumer_timeout
        return timeout or None
