"""docker-compose.yml and .env.example: valid against the Compose Specification, and the
deployment the issue asks for (AOF Redis, scalable workers, one beat, Flower and the run explorer
behind auth)."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from importlib.resources import files
from typing import Any

import jsonschema
import pytest
import yaml
from compose_files import COMPOSE, ENV_EXAMPLE, ROOT, MissingVariable, command_of, load_compose, read_env_file

from graphrunner.cluster.preflight import node_timeouts
from graphrunner.settings import Settings

PLACEHOLDER = "change-me"


def compose_schema() -> dict[str, Any]:
    """The Compose Specification's JSON schema, as check-jsonschema vendors it."""
    text = files("check_jsonschema.builtin_schemas.vendor").joinpath("compose-spec.json").read_text()
    return json.loads(text)  # type: ignore[no-any-return]


def validate(doc: dict[str, Any]) -> None:
    schema = compose_schema()
    jsonschema.validators.validator_for(schema)(schema).validate(doc)


def test_compose_file_is_valid_against_the_compose_specification() -> None:
    validate(yaml.safe_load(COMPOSE.read_text()))
    validate(load_compose())


def test_the_schema_check_can_fail() -> None:
    doc = load_compose()
    broken = copy.deepcopy(doc)
    broken["services"]["worker"]["stop_grace_periodd"] = "1s"
    with pytest.raises(jsonschema.ValidationError, match="stop_grace_periodd"):
        validate(broken)
    broken = copy.deepcopy(doc)
    broken["services"]["worker"]["healthcheck"] = {"test": 3}
    with pytest.raises(jsonschema.ValidationError):
        validate(broken)


def test_check_jsonschema_cli_accepts_the_file() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "check_jsonschema", "--builtin-schema", "vendor.compose-spec", str(COMPOSE)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_redis_keeps_an_append_only_file_and_never_evicts() -> None:
    redis = load_compose()["services"]["redis"]
    argv = command_of(redis)
    pairs = dict(zip(argv[1::2], argv[2::2], strict=False))
    assert pairs["--appendonly"] == "yes"
    assert pairs["--appendfsync"] == "everysec"
    assert pairs["--maxmemory-policy"] == "noeviction"
    assert pairs["--requirepass"] == read_env_file()["REDIS_PASSWORD"]
    assert any(v.endswith(":/data") for v in redis["volumes"])
    assert redis["healthcheck"]["test"][:2] == ["CMD", "redis-cli"]
    assert "ports" not in redis  # reachable only on the compose network


def test_worker_scales_with_no_fixed_name_or_host_port() -> None:
    services = load_compose()["services"]
    worker = services["worker"]
    assert "container_name" not in worker and "ports" not in worker
    assert command_of(worker)[:2] == ["graphrunner", "worker"]
    assert worker["build"]["dockerfile"] == "workers/Dockerfile"
    assert worker["depends_on"]["redis"]["condition"] == "service_healthy"


def test_stop_grace_covers_the_longest_node_timeout_of_the_shipped_graphs() -> None:
    env = read_env_file()
    services = load_compose()["services"]
    grace = services["worker"]["stop_grace_period"]
    assert grace == f"{env['GRAPHRUNNER_STOP_GRACE']}s"
    assert services["worker"]["environment"]["GRAPHRUNNER_STOP_GRACE"] == env["GRAPHRUNNER_STOP_GRACE"]
    graphs = Settings(graph_path=(ROOT / "graphs", ROOT / "workers" / "example_tools" / "graphs"))
    longest = max((t for _, _, t in node_timeouts(graphs)), default=0.0)
    assert longest <= int(env["GRAPHRUNNER_STOP_GRACE"])


def test_exactly_one_beat() -> None:
    services = load_compose()["services"]
    beats = [name for name, s in services.items() if "beat" in command_of(s)]
    assert beats == ["beat"]
    assert services["beat"].get("deploy", {}).get("replicas", 1) == 1
    assert command_of(services["beat"]) == ["graphrunner", "beat"]


def test_flower_gets_its_auth_from_the_environment() -> None:
    flower = load_compose()["services"]["flower"]
    assert command_of(flower)[:2] == ["graphrunner", "flower"]
    assert flower["environment"]["FLOWER_BASIC_AUTH"] == read_env_file()["FLOWER_BASIC_AUTH"]
    assert not any(a.startswith(("--basic-auth", "--no-auth")) for a in command_of(flower))
    env = {k: v for k, v in read_env_file().items() if k != "FLOWER_BASIC_AUTH"}
    with pytest.raises(MissingVariable, match="FLOWER_BASIC_AUTH"):
        load_compose(env)


def test_the_run_explorer_gets_its_users_from_the_environment() -> None:
    ui = load_compose()["services"]["ui"]
    assert command_of(ui) == ["graphrunner", "ui", "--address=0.0.0.0", "--port=8808"]
    users = read_env_file()["GRAPHRUNNER_UI_BASIC_AUTH"]
    assert ui["environment"]["GRAPHRUNNER_UI_BASIC_AUTH"] == users
    assert not any(a.startswith(("--basic-auth", "--no-auth")) for a in command_of(ui))
    env = {k: v for k, v in read_env_file().items() if k != "GRAPHRUNNER_UI_BASIC_AUTH"}
    with pytest.raises(MissingVariable, match="GRAPHRUNNER_UI_BASIC_AUTH"):
        load_compose(env)


def test_the_run_explorer_is_published_and_checks_its_open_health_endpoint() -> None:
    env = read_env_file()
    ui = load_compose()["services"]["ui"]
    assert ui["ports"] == [f"{env['GRAPHRUNNER_UI_PORT']}:8808"]
    assert load_compose({**env, "GRAPHRUNNER_UI_PORT": ""})["services"]["ui"]["ports"] == ["8808:8808"]
    test = ui["healthcheck"]["test"]
    assert test[:2] == ["CMD", "python"]
    assert "'http://127.0.0.1:8808/healthcheck'" in test[-1]
    assert ui["depends_on"]["redis"]["condition"] == "service_healthy"
    assert (
        ui["environment"]["GRAPHRUNNER_REDIS_URL"]
        == load_compose()["services"]["worker"]["environment"]["GRAPHRUNNER_REDIS_URL"]
    )
    assert ui.get("deploy", {}).get("replicas", 1) == 1


def test_every_graphrunner_service_turns_task_events_on() -> None:
    services = load_compose()["services"]
    for name in ("worker", "beat", "flower", "ui", "producer"):
        assert services[name]["environment"]["GRAPHRUNNER_TASK_EVENTS"] == "1", name


def test_producer_is_an_example_run_on_demand() -> None:
    producer = load_compose()["services"]["producer"]
    assert producer["profiles"] == ["producer"]
    script = command_of(producer)[1]
    assert (ROOT / script.removeprefix("/app/")).is_file()


def test_no_secret_is_committed() -> None:
    for key, value in read_env_file(ENV_EXAMPLE).items():
        if "PASSWORD" in key or "AUTH" in key:
            assert PLACEHOLDER in value, f"{key} in .env.example must be a placeholder"
    ignored = subprocess.run(["git", "check-ignore", "-q", ".env"], cwd=ROOT, check=False)
    assert ignored.returncode == 0, ".env must be git-ignored"
    raw = yaml.safe_load(COMPOSE.read_text())["services"]  # before interpolation
    secrets = [
        raw["flower"]["environment"]["FLOWER_BASIC_AUTH"],
        raw["ui"]["environment"]["GRAPHRUNNER_UI_BASIC_AUTH"],
        raw["redis"]["environment"]["REDISCLI_AUTH"],
        raw["redis"]["command"][raw["redis"]["command"].index("--requirepass") + 1],
        raw["worker"]["environment"]["GRAPHRUNNER_REDIS_URL"],
    ]
    variables = ("${REDIS_PASSWORD", "${FLOWER_BASIC_AUTH", "${GRAPHRUNNER_UI_BASIC_AUTH")
    assert all(any(v in s for v in variables) for s in secrets), secrets
