"""docker-compose.yml and .env.example: valid against the Compose Specification, and the
deployment the issue asks for (AOF Redis, scalable workers, one beat, Flower and the run explorer
behind auth), secure by default (loopback ports, hardened containers, no password in argv,
least-privilege capabilities, pinned images)."""

from __future__ import annotations

import copy
import json
import re
import subprocess
import sys
from importlib.resources import files
from ipaddress import ip_address
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from compose_files import (
    COMPOSE,
    ENV_EXAMPLE,
    OBSERVABILITY,
    ROOT,
    MissingVariable,
    argv_of_service,
    command_of,
    deployed_env,
    load_compose,
    read_env_file,
    redis_server_options,
)

from graphrunner.cluster.worker.preflight import node_timeouts
from graphrunner.settings import PURE_BUILTINS, Settings
from graphrunner.tools.addresses import AddressPolicy

PLACEHOLDER = "change-me"
SERVICES = ("redis", "worker", "beat", "flower", "ui", "producer")
# host files a service may mount: the observability profile's configuration, read-only
OBSERVABILITY_FILES = "./deploy/observability/"


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
    argv = argv_of_service(redis)
    assert argv[:2] == ["/bin/sh", "-ec"] and len(argv) == 3
    options = redis_server_options(argv[2])
    assert options["--appendonly"] == "yes"
    assert options["--appendfsync"] == "everysec"
    assert options["--maxmemory-policy"] == "noeviction"
    assert "--requirepass" not in options  # the password comes on stdin (test_compose_processes.py runs it)
    assert any(v.endswith(":/data") for v in redis["volumes"])
    assert redis["healthcheck"]["test"] == ["CMD-SHELL", "redis-cli ping | grep -q PONG"]
    assert "ports" not in redis  # reachable only on the compose network


def _bytes(size: str) -> int:
    """`768mb`, `1g`, `512m` as bytes (Redis and compose spell units differently)."""
    number, unit = re.fullmatch(r"(\d+)\s*([kmg]?)b?", size.lower()).groups()  # type: ignore[union-attr]
    return int(number) * 1024 ** " kmg".index(unit or " ")


def test_redis_refuses_writes_before_its_container_is_out_of_memory() -> None:
    redis = load_compose()["services"]["redis"]
    maxmemory = _bytes(redis_server_options(argv_of_service(redis)[2])["--maxmemory"])
    limit = _bytes(redis["deploy"]["resources"]["limits"]["memory"])
    assert maxmemory <= 0.8 * limit, (maxmemory, limit)


def test_worker_scales_with_no_fixed_name_or_host_port() -> None:
    services = load_compose()["services"]
    worker = services["worker"]
    assert "container_name" not in worker and "ports" not in worker
    assert command_of(worker)[:2] == ["graphrunner", "worker"]
    assert worker["build"]["dockerfile"] == "workers/Dockerfile"
    assert worker["depends_on"]["redis"]["condition"] == "service_healthy"


def test_worker_health_reads_its_liveness_file_on_the_tmpfs() -> None:
    """No network in the worker's health check (a Redis outage marks no worker unhealthy); the
    file it reads is under /tmp, the tmpfs of a read-only container."""
    from graphrunner.settings import LIVENESS_FILE

    worker = load_compose()["services"]["worker"]
    test = worker["healthcheck"]["test"]
    assert test[:3] == ["CMD", "graphrunner", "alive"]
    assert float(test[test.index("--max-age") + 1]) >= 30
    assert worker["read_only"] is True
    assert any(LIVENESS_FILE.is_relative_to(t.split(":")[0]) for t in worker["tmpfs"]), worker["tmpfs"]


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
    assert ui["ports"] == [f"127.0.0.1:{env['GRAPHRUNNER_UI_PORT']}:8808"]
    assert load_compose({**env, "GRAPHRUNNER_UI_PORT": ""})["services"]["ui"]["ports"] == [
        "127.0.0.1:8808:8808"
    ]
    test = ui["healthcheck"]["test"]
    assert test[:2] == ["CMD", "python"]
    assert "'http://127.0.0.1:8808/healthcheck'" in test[-1]
    assert ui["depends_on"]["redis"]["condition"] == "service_healthy"
    assert (
        ui["environment"]["GRAPHRUNNER_REDIS_URL"]
        == load_compose()["services"]["worker"]["environment"]["GRAPHRUNNER_REDIS_URL"]
    )
    assert ui.get("deploy", {}).get("replicas", 1) == 1


# -- secure by default -------------------------------------------------------------------------


def test_only_flower_and_the_explorer_are_published_and_on_loopback_unless_told() -> None:
    env = read_env_file()
    assert env["FLOWER_BIND"] == env["GRAPHRUNNER_UI_BIND"] == "127.0.0.1"
    unset = {k: v for k, v in env.items() if not k.endswith(("_BIND", "_PORT"))}
    for variables in (env, unset):
        published = {
            name: s["ports"]
            for name, s in load_compose(variables)["services"].items()
            if "ports" in s and name not in OBSERVABILITY  # test_observability_deploy.py: loopback only
        }
        assert published == {"flower": ["127.0.0.1:5555:5555"], "ui": ["127.0.0.1:8808:8808"]}
    told = load_compose({**env, "FLOWER_BIND": "0.0.0.0", "GRAPHRUNNER_UI_BIND": "10.0.0.5"})["services"]
    assert told["flower"]["ports"] == ["0.0.0.0:5555:5555"]  # an operator's explicit choice
    assert told["ui"]["ports"] == ["10.0.0.5:8808:8808"]
    assert "TLS proxy" in COMPOSE.read_text() and "TLS proxy" in ENV_EXAMPLE.read_text()


@pytest.mark.parametrize("name", SERVICES + OBSERVABILITY)
def test_every_service_is_hardened_and_limited(name: str) -> None:
    services = load_compose()["services"]
    assert set(services) == set(SERVICES + OBSERVABILITY)
    service = services[name]
    assert service["cap_drop"] == ["ALL"] and "cap_add" not in service
    assert "no-new-privileges:true" in service["security_opt"]
    assert service["read_only"] is True
    assert "/tmp" in [t.split(":")[0] for t in service["tmpfs"]]
    assert not service.get("privileged", False)
    assert service.get("network_mode") != "host" and "pid" not in service
    user = str(service["user"]).split(":")
    assert user[0] not in ("", "0", "root") and user[-1] not in ("", "0", "root"), user
    limits = service["deploy"]["resources"]["limits"]
    assert float(limits["cpus"]) > 0 and _bytes(limits["memory"]) >= 128 * 1024**2
    assert 0 < service["pids_limit"] <= 4096
    host_paths = [str(v) for v in service.get("volumes", []) if str(v).startswith(("/", "./", "~"))]
    configuration = [v for v in host_paths if v.startswith(OBSERVABILITY_FILES) and v.endswith(":ro")]
    assert host_paths == configuration  # no host path but the observability configuration, read-only


def test_no_command_or_healthcheck_holds_the_redis_password() -> None:
    env = {**deployed_env(), "REDIS_PASSWORD": "s3cret-in-the-env-only"}
    for name, service in load_compose(env)["services"].items():
        lines = [argv_of_service(service)]
        test = service.get("healthcheck", {}).get("test")
        if isinstance(test, list):
            lines.append(test[1:])
        for argv in lines:
            assert not [a for a in argv if "s3cret-in-the-env-only" in a], name
            words = [w for a in argv for w in a.split()]
            assert "--requirepass" not in words and "-a" not in words and "--pass" not in words, name
            assert not [w for w in words if w.startswith(("--requirepass", "-a=", "--pass="))], name
    redis = load_compose(env)["services"]["redis"]
    assert (
        redis["environment"]["REDIS_PASSWORD"]
        == redis["environment"]["REDISCLI_AUTH"]
        == env["REDIS_PASSWORD"]
    )


def capability_list(value: str) -> list[str]:
    return [p.strip() for p in value.split(",") if p.strip()]


def shipped_default_capabilities() -> dict[str, list[str]]:
    """GRAPHRUNNER_DEFAULT_CAPABILITIES as each shipped file sets it (or leaves it to compose's default)."""
    from dockerfile_parse import DockerfileParser

    env = read_env_file()
    unset = {k: v for k, v in env.items() if k != "GRAPHRUNNER_DEFAULT_CAPABILITIES"}
    configmaps = [
        d
        for d in yaml.safe_load_all((ROOT / "deploy" / "configmap.yaml").read_text())
        if d and d["kind"] == "ConfigMap"
    ]
    found = {
        ".env.example": env["GRAPHRUNNER_DEFAULT_CAPABILITIES"],
        "compose with .env.example": load_compose(env)["services"]["worker"]["environment"][
            "GRAPHRUNNER_DEFAULT_CAPABILITIES"
        ],
        "compose without it": load_compose(unset)["services"]["worker"]["environment"][
            "GRAPHRUNNER_DEFAULT_CAPABILITIES"
        ],
        "deploy/configmap.yaml": configmaps[0]["data"]["GRAPHRUNNER_DEFAULT_CAPABILITIES"],
    }
    image_env = DockerfileParser(path=str(ROOT / "workers" / "Dockerfile")).envs
    if "GRAPHRUNNER_DEFAULT_CAPABILITIES" in image_env:
        found["workers/Dockerfile"] = image_env["GRAPHRUNNER_DEFAULT_CAPABILITIES"]
    return {where: capability_list(value) for where, value in found.items()}


def test_no_shipped_file_defaults_capabilities_to_everything() -> None:
    for where, patterns in shipped_default_capabilities().items():
        assert patterns, where
        assert not [p for p in patterns if "*" in p or "?" in p or "[" in p], where  # exact names only
        assert set(PURE_BUILTINS) <= set(patterns), where
    assert shipped_default_capabilities()["compose without it"] == list(PURE_BUILTINS)
    for text in (COMPOSE.read_text(), ENV_EXAMPLE.read_text()):
        assert ":-*}" not in text and "CAPABILITIES=*" not in text


def tools_of(graph_file: Path) -> set[str]:
    """The `tool:NAME` capabilities a graph's actions need."""

    def walk(node: Any) -> set[str]:
        if isinstance(node, dict):
            action = node.get("action")
            found = {f"tool:{action['tool']}"} if isinstance(action, dict) and "tool" in action else set()
            return found.union(*(walk(v) for v in node.values()))
        if isinstance(node, list):
            return set().union(*(walk(v) for v in node))
        return set()

    return walk(yaml.safe_load(graph_file.read_text()))


def test_the_default_capabilities_are_exactly_what_the_examples_need() -> None:
    """The example producer's graph and the example tools' graph; .env.example and the ConfigMap agree."""
    ids = {yaml.safe_load(g.read_text())["id"]: g for g in (ROOT / "graphs").glob("*.yaml")}
    needed = tools_of(ids[_producer_default_graph()]) | tools_of(
        ROOT / "workers" / "example_tools" / "graphs" / "slugify.yaml"
    )
    shipped = shipped_default_capabilities()
    assert shipped[".env.example"] == shipped["deploy/configmap.yaml"]
    assert set(shipped[".env.example"]) == needed | set(PURE_BUILTINS)
    for pattern in set(shipped[".env.example"]) - set(PURE_BUILTINS):  # each one explained
        assert ENV_EXAMPLE.read_text().count(pattern) >= 2, pattern


def _producer_default_graph() -> str:
    text = (ROOT / "workers" / "example_producer.py").read_text()
    match = re.search(r'"--graph", default="([^"]+)"', text)
    assert match, "the example producer's default graph"
    return match.group(1)


def test_images_are_pinned_to_exact_releases() -> None:
    from dockerfile_parse import DockerfileParser

    services = load_compose()["services"]
    assert re.fullmatch(r"redis:\d+\.\d+\.\d+-alpine", services["redis"]["image"])
    images = {s["image"] for name, s in services.items() if name != "redis" and name not in OBSERVABILITY}
    assert images == {"graphrunner-worker:0.1.0"}  # built here, tagged with the project's version
    base = DockerfileParser(path=str(ROOT / "workers" / "Dockerfile")).baseimage
    assert re.fullmatch(r"python:3\.\d+\.\d+-slim-[a-z]+(@sha256:[0-9a-f]{64})?", base), base
    for image in (services["redis"]["image"], base, *images):
        assert not image.endswith((":latest", ":7", ":3.12-slim")), image
    docs = (ROOT / "docs" / "deploy.md").read_text()
    assert "docker buildx imagetools inspect" in docs and "@sha256:" in docs


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
        raw["redis"]["environment"]["REDIS_PASSWORD"],
        raw["worker"]["environment"]["GRAPHRUNNER_REDIS_URL"],
    ]
    variables = ("${REDIS_PASSWORD", "${FLOWER_BASIC_AUTH", "${GRAPHRUNNER_UI_BASIC_AUTH")
    assert all(any(v in s for v in variables) for s in secrets), secrets


def shipped_http_deny() -> dict[str, str]:
    """GRAPHRUNNER_HTTP_DENY as each shipped file sets it (or leaves it to compose's default)."""
    env = read_env_file()
    unset = {k: v for k, v in env.items() if k != "GRAPHRUNNER_HTTP_DENY"}
    configmap = next(
        d
        for d in yaml.safe_load_all((ROOT / "deploy" / "configmap.yaml").read_text())
        if d and d["kind"] == "ConfigMap"
    )
    return {
        ".env.example": env["GRAPHRUNNER_HTTP_DENY"],
        "compose without it": load_compose(unset)["services"]["worker"]["environment"][
            "GRAPHRUNNER_HTTP_DENY"
        ],
        "deploy/configmap.yaml": configmap["data"]["GRAPHRUNNER_HTTP_DENY"],
    }


@pytest.mark.parametrize(
    ("host", "address"),
    [("redis", "172.18.0.2"), ("graphrunner-redis.graphrunner.svc", "10.96.4.7"), ("localhost", "127.0.0.1")],
)
def test_the_http_tool_of_a_shipped_deployment_cannot_reach_its_own_services(host: str, address: str) -> None:
    """A run granted tool:http reaches neither Redis nor Flower nor the explorer (issue 24, item 5)."""
    for where, deny in shipped_http_deny().items():
        policy = AddressPolicy.parse(deny=capability_list(deny))
        refused = policy.host_refusal(host) or policy.address_refusal(host, ip_address(address))
        assert refused is not None, f"{where} lets the http tool reach {host} at {address}"
        assert policy.address_refusal("example.com", ip_address("93.184.216.34")) is None, where
