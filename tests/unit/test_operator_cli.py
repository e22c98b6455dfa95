"""The operator's commands without a cluster: help texts, start-up checks, Flower's options,
tool plugins that do not load."""

from __future__ import annotations

import re
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest
from click.testing import CliRunner

from graphrunner.cli import main
from graphrunner.cli.flower_auth import FlowerAuthError, check_options
from graphrunner.cluster.worker.preflight import check_stop_grace, check_worker, node_timeouts, pool_of
from graphrunner.errors import ConfigurationError
from graphrunner.settings import Settings
from graphrunner.tools import ToolRegistry
from graphrunner.tools import registry as registry_module

REDIS = "redis://127.0.0.1:1/0"


@pytest.mark.parametrize("flag", ["-h", "--help"])
def test_worker_help_lists_celerys_options(flag: str) -> None:
    result = CliRunner().invoke(main, ["worker", flag], env={"GRAPHRUNNER_REDIS_URL": ""})
    assert result.exit_code == 0, result.output
    assert result.output.startswith("Usage: graphrunner worker [CELERY WORKER OPTIONS]")
    for option in (
        "--concurrency",
        "--queues",
        "--pool",
        "--hostname",
        "--autoscale",
        "GRAPHRUNNER_WORKER_CONFIG",
    ):
        assert option in result.output
    assert "celery -A proj" not in result.output  # Celery's own usage examples are left out


def test_flower_help_lists_flowers_options() -> None:
    result = CliRunner().invoke(main, ["flower", "--help"])
    assert result.exit_code == 0
    assert (
        "--no-auth" in result.output and "--basic-auth" in result.output and "--url-prefix" in result.output
    )


@pytest.mark.parametrize(
    ("args", "pool"),
    [
        ((), None),
        (("-P", "solo"), "solo"),
        (("-Psolo",), "solo"),
        (("--pool", "threads"), "threads"),
        (("--pool=solo", "-c", "2"), "solo"),
        (("-P", "solo", "--pool=prefork"), "prefork"),
        (("-c", "4", "-Q", "a,b"), None),
    ],
)
def test_pool_of_reads_every_spelling(args: tuple[str, ...], pool: str | None) -> None:
    assert pool_of(args) == pool


def test_worker_refuses_settings_that_cannot_work() -> None:
    with pytest.raises(ConfigurationError, match="GRAPHRUNNER_REDIS_URL is not set"):
        check_worker(Settings(), [])
    with pytest.raises(
        ConfigurationError, match="GRAPHRUNNER_VISIBILITY_TIMEOUT is 1s: it must be at least 2s"
    ):
        check_worker(Settings(redis_url=REDIS, visibility_timeout=1), [])
    with pytest.raises(ConfigurationError, match="--pool=solo is not supported"):
        check_worker(Settings(redis_url=REDIS), ["-P", "solo"])
    check_worker(Settings(redis_url=REDIS, visibility_timeout=2), ["-P", "threads"])


@pytest.mark.parametrize(
    ("pool", "why"),
    [
        ("solo", "runs steps in the worker's own loop"),
        ("gevent", "does not monkey-patch"),
        ("eventlet", "does not monkey-patch"),
        ("custom", "cannot tell whether its loop vouches"),
    ],
)
def test_worker_refuses_every_pool_that_cannot_vouch(pool: str, why: str) -> None:
    """A pool whose consumer loop stops while a step runs would neither vouch for the messages the
    worker holds nor touch its liveness file."""
    with pytest.raises(ConfigurationError, match=f"--pool={pool} is not supported: .*{re.escape(why)}"):
        check_worker(Settings(redis_url=REDIS), [f"--pool={pool}"])
    for supported in ("prefork", "processes", "threads"):
        check_worker(Settings(redis_url=REDIS), ["-P", supported])


def test_a_refused_pool_stops_the_worker_command_before_it_starts() -> None:
    result = CliRunner().invoke(main, ["worker", "-P", "gevent"], env={"GRAPHRUNNER_REDIS_URL": REDIS})
    assert result.exit_code == 2, result.output
    assert "--pool=gevent is not supported" in result.output


def _graphs(tmp_path: Path) -> Path:
    (tmp_path / "long.yaml").write_text(
        "id: t/long\nconfig: {start: a}\nnodes:\n"
        "  a: {action: {tool: echo}, timeout: 90, next: b}\n"
        "  b: {action: {tool: echo}, next: done}\n"
        "  done: {type: return}\n"
    )
    (tmp_path / "broken.yaml").write_text("id: t/broken\nnodes: [\n")
    return tmp_path


def test_node_timeouts_of_the_graph_path_skip_a_graph_that_does_not_load(tmp_path: Path) -> None:
    settings = Settings(graph_path=(_graphs(tmp_path),))
    assert list(node_timeouts(settings)) == [("t/long", "a", 90.0)]


def test_stop_grace_shorter_than_a_node_timeout_is_refused(tmp_path: Path) -> None:
    path = (_graphs(tmp_path),)
    check_stop_grace(Settings(graph_path=path))  # not set: nothing to check
    check_stop_grace(Settings(graph_path=path, stop_grace=90))
    with pytest.raises(ConfigurationError) as refused:
        check_stop_grace(Settings(graph_path=path, stop_grace=60))
    assert "GRAPHRUNNER_STOP_GRACE is 60s but node 'a' of graph 't/long' may run 90s" in str(refused.value)


def test_stop_grace_setting_must_be_positive(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GRAPHRUNNER_STOP_GRACE", "0")
    with pytest.raises(ValueError, match="GRAPHRUNNER_STOP_GRACE must be at least 1"):
        Settings.from_env()
    monkeypatch.setenv("GRAPHRUNNER_STOP_GRACE", "120")
    assert Settings.from_env().stop_grace == 120


def fresh_options() -> None:
    """Forget what an earlier `check_options` parsed (one process parses once in real use)."""
    from tornado.options import options

    options.basic_auth, options.auth, options.address = [], "", ""


@pytest.mark.usefixtures("flower_options")
def test_flower_options_need_auth_or_no_auth_on_loopback() -> None:
    assert check_options(["--basic-auth=ops:pw"], no_auth=False) == ["--basic-auth=ops:pw"]
    fresh_options()
    with pytest.raises(FlowerAuthError, match="Flower needs authentication"):
        check_options([], no_auth=False)
    assert check_options([], no_auth=True) == ["--address=127.0.0.1"]
    assert check_options(["--address=127.0.0.2"], no_auth=True) == ["--address=127.0.0.2"]
    fresh_options()
    with pytest.raises(FlowerAuthError, match=r"not on --address=10\.0\.0\.5"):
        check_options(["--address=10.0.0.5"], no_auth=True)


@pytest.mark.usefixtures("flower_options")
def test_flower_auth_from_the_environment_counts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FLOWER_BASIC_AUTH", "ops:pw,dev:pw2")
    assert check_options([], no_auth=False) == []


@pytest.mark.usefixtures("flower_options")
@pytest.mark.parametrize("credential", ["ops", "ops:", ":pw"])
def test_flower_refuses_a_credential_that_cannot_log_in(credential: str) -> None:
    with pytest.raises(FlowerAuthError, match="is not user:password"):
        check_options([f"--basic-auth={credential}"], no_auth=False)


def test_a_tool_plugin_that_does_not_load_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    broken = EntryPoint(name="team", value="no_such_team_module:Tool", group="graphrunner.tools")
    monkeypatch.setattr(registry_module, "entry_points", lambda group: [broken])
    with pytest.raises(ConfigurationError) as refused:
        ToolRegistry().load_entry_points()
    message = str(refused.value)
    assert "tool plugin team = no_such_team_module:Tool (entry point group graphrunner.tools)" in message
    assert "ModuleNotFoundError" in message


@pytest.mark.parametrize(
    ("url", "message"),
    [
        (
            "redis+cluster://127.0.0.1:7000/0",
            "GRAPHRUNNER_BROKER_URL is not set: GRAPHRUNNER_REDIS_URL names a Redis Cluster",
        ),
        ("amqp://guest@localhost//", "redis+cluster:// or rediss+cluster://, not 'amqp'"),
    ],
)
def test_worker_refuses_a_store_url_it_cannot_use(url: str, message: str) -> None:
    with pytest.raises(ConfigurationError, match=re.escape(message)):
        check_worker(Settings(redis_url=url), [])
