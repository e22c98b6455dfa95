"""The commands docker-compose.yml runs, run as local processes against a test Redis.

There is no Docker daemon here, so each service's `command` and `environment` are taken
from the compose file (interpolated with .env.example, its `change-me` passwords replaced by
real ones as an operator must), the image's ENV from the Dockerfile, and run as they would run
in the container, with three changes only: the Redis URL names the test's Redis, `/app/...`
paths (the image's copy of this repository) name this checkout, and workers after the first
get `-n wN@%h` because here they share one hostname, where containers each have their own.
The redis service's own command runs with the system `redis-server`, on a free loopback port.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from compose_files import (
    ROOT,
    SECRET,
    argv_of_service,
    command_of,
    deployed_env,
    load_compose,
    read_env_file,
    redis_server_options,
)
from dockerfile_parse import DockerfileParser

from graphrunner.client import Client
from graphrunner.cluster.transport.messages import ITEM_TASK, STEP_TASK
from graphrunner.embedded import EmbeddedRedis, free_port
from graphrunner.settings import Settings

HERE = Path(__file__).resolve().parent
DOCKERFILE = ROOT / "workers" / "Dockerfile"
SLOW = ["tool:python:deploy_targets.slow"]  # what the test graphs run: granted, nothing more


def composed(name: str) -> dict[str, object]:
    """A service of docker-compose.yml, interpolated with .env.example as an operator fills it in."""
    service: dict[str, object] = load_compose(deployed_env())["services"][name]
    return service


def image_env() -> dict[str, str]:
    """The ENV of the worker image."""
    parser = DockerfileParser(path=str(DOCKERFILE))
    return dict(parser.envs)


def local_path(value: str) -> str:
    """An `/app/...` path of the image as the path in this checkout (COPY . /app, in parts)."""
    return str(ROOT / value.removeprefix("/app/")) if value.startswith("/app/") else value


def service_env(name: str, redis_url: str) -> dict[str, str]:
    """The environment a compose service's container gets, pointed at `redis_url`."""
    service = composed(name)
    environment: dict[str, object] = service.get("environment", {})  # type: ignore[assignment]
    env = {**image_env(), **{k: str(v) for k, v in environment.items()}}
    env = {k: local_path(v) for k, v in env.items()}
    env["GRAPHRUNNER_REDIS_URL"] = redis_url
    path = os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])
    return {**os.environ, **env, "PYTHONPATH": path}


def argv_of(name: str, *extra: str) -> list[str]:
    """The service's command, run with this interpreter (`graphrunner` is its console script)."""
    argv = command_of(composed(name))
    assert argv[0] == "graphrunner"
    return [sys.executable, "-m", "graphrunner", *argv[1:], *extra]


class Service:
    """One process of a compose service, in its own process group, logging to a file."""

    def __init__(self, argv: list[str], env: dict[str, str], log: Path) -> None:
        self.log = log
        with log.open("w") as out:
            self.proc = subprocess.Popen(
                argv, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_for_log(self, needle: str, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while needle not in self.text():
            if self.proc.poll() is not None:
                raise AssertionError(f"exited {self.proc.returncode}: {self.text()[-3000:]}")
            if time.monotonic() > deadline:
                raise AssertionError(f"no {needle!r} after {timeout}s: {self.text()[-3000:]}")
            time.sleep(0.2)

    def signal_group(self, sig: int) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, sig)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.signal_group(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.signal_group(signal.SIGKILL)
                self.proc.wait(timeout=10)


@pytest.fixture
def started(tmp_path: Path) -> Iterator[list[Service]]:
    services: list[Service] = []
    yield services
    for service in services:
        service.stop()


def start_worker(
    n: int, private_redis: EmbeddedRedis, tmp_path: Path, started: list[Service], **env: str
) -> Service:
    extra = () if n == 0 else ("-n", f"w{n}@%h")
    worker = Service(
        argv_of("worker", *extra), {**service_env("worker", private_redis.url), **env}, tmp_path / f"w{n}.log"
    )
    started.append(worker)
    return worker


def graph_file(tmp_path: Path, seconds: float, steps: int) -> Path:
    nodes = "\n".join(
        f"""  s{i}:
    action: {{tool: python, params: {{fn: "deploy_targets:slow", args: {{seconds: {seconds}, marker: "${{inputs.marker}}", label: "${{inputs.label}}-s{i}"}}}}}}
    next: {f"s{i + 1}" if i + 1 < steps else "done"}"""
        for i in range(steps)
    )
    path = tmp_path / f"slow-{uuid.uuid4().hex[:6]}.yaml"
    path.write_text(
        f"""id: deploy/slow
inputs:
  marker: {{type: string, default: ""}}
  label: {{type: string, default: ""}}
config:
  start: s0
nodes:
{nodes}
  done:
    type: return
"""
    )
    return path


def client_of(private_redis: EmbeddedRedis) -> Client:
    return Client(settings=Settings(redis_url=private_redis.url))


def test_three_workers_one_sigkilled_mid_flight_every_run_completes(
    private_redis: EmbeddedRedis, tmp_path: Path, started: list[Service]
) -> None:
    workers = [start_worker(n, private_redis, tmp_path, started) for n in range(3)]
    beat = Service(argv_of("beat"), service_env("beat", private_redis.url), tmp_path / "beat.log")
    started.append(beat)
    for worker in workers:
        worker.wait_for_log(" ready.")
    marker = tmp_path / "marks.txt"
    graph = graph_file(tmp_path, 0.3, 3)
    with client_of(private_redis) as client:
        runs = [
            client.submit(graph, {"marker": str(marker), "label": f"r{n}"}, capabilities=SLOW)
            for n in range(30)
        ]
        victim = workers[1]
        deadline = time.monotonic() + 120
        while not _holds_a_step(victim, marker):  # kill it while it runs a step
            assert time.monotonic() < deadline, "the second worker never took a step"
            time.sleep(0.05)
        victim.signal_group(signal.SIGKILL)
        results = [run.wait(timeout=240) for run in runs]
    assert [r.status for r in results] == ["completed"] * 30
    assert all(r.path == ["s0", "s1", "s2", "done"] for r in results), [r.path for r in results]
    done = [line.split()[1] for line in marker.read_text().splitlines() if line.startswith("done")]
    assert len(set(done)) == 90  # every step's action finished (the killed one ran again)


def _holds_a_step(worker: Service, marker: Path) -> bool:
    """A pool process of `worker` has started a step it has not finished."""
    if not marker.exists():
        return False
    open_steps: dict[str, int] = {}
    for line in marker.read_text().splitlines():
        kind, label, pid = line.split()
        open_steps[label] = int(pid) if kind == "start" else 0
    return any(pid and _in_group(pid, worker.proc.pid) for pid in open_steps.values())


def _in_group(pid: int, group: int) -> bool:
    try:
        return os.getpgid(pid) == group
    except ProcessLookupError:
        return False


def test_sigterm_mid_step_finishes_the_step_and_loses_nothing(
    private_redis: EmbeddedRedis, tmp_path: Path, started: list[Service]
) -> None:
    """What a KEDA scale-down or `docker compose stop` does: SIGTERM to the container's PID 1."""
    worker = start_worker(0, private_redis, tmp_path, started)
    worker.wait_for_log(" ready.")
    marker = tmp_path / "marks.txt"
    with client_of(private_redis) as client:
        run = client.submit(
            graph_file(tmp_path, 3, 2), {"marker": str(marker), "label": "r"}, capabilities=SLOW
        )
        deadline = time.monotonic() + 60
        while not (marker.exists() and "start r-s0" in marker.read_text()):
            assert time.monotonic() < deadline, worker.text()[-2000:]
            time.sleep(0.05)
        os.kill(worker.proc.pid, signal.SIGTERM)  # the main process only, as docker stop does
        assert worker.proc.wait(timeout=60) == 0, worker.text()[-3000:]
        assert "done r-s0" in marker.read_text()  # the step in flight finished before it exited
        successor = start_worker(1, private_redis, tmp_path, started)
        successor.wait_for_log(" ready.")
        result = run.wait(timeout=120)
    assert result.status == "completed"
    assert result.path == ["s0", "s1", "done"]
    starts = [line for line in marker.read_text().splitlines() if line.startswith("start")]
    assert [s.split()[1] for s in starts] == ["r-s0", "r-s1"]  # each step ran once


def test_the_image_healthcheck_reads_the_workers_liveness_file_for_real(
    private_redis: EmbeddedRedis, tmp_path: Path, started: list[Service]
) -> None:
    """The HEALTHCHECK as written, against a real worker: it fails before the worker runs, passes
    while it runs, and fails once it has stopped; the probe itself has no Redis to reach."""
    parser = DockerfileParser(path=str(DOCKERFILE))
    healthcheck = [i["value"] for i in parser.structure if i["instruction"] == "HEALTHCHECK"]
    assert len(healthcheck) == 1
    argv = _exec_form(healthcheck[0])
    assert argv[:2] == ["graphrunner", "alive"]
    probe = [sys.executable, "-m", "graphrunner", *argv[1:]]
    alive_file = {"GRAPHRUNNER_LIVENESS_FILE": str(tmp_path / "worker.alive")}  # /tmp is shared here
    env = {**service_env("worker", "redis://127.0.0.1:1/0"), **alive_file}
    assert subprocess.run(probe, env=env, capture_output=True, timeout=60, check=False).returncode == 1
    worker = start_worker(0, private_redis, tmp_path, started, **alive_file)
    worker.wait_for_log(" ready.")
    answer = subprocess.run(probe, env=env, capture_output=True, text=True, timeout=60, check=False)
    assert answer.returncode == 0, answer.stdout + answer.stderr
    assert "alive:" in answer.stdout
    worker.stop()
    assert subprocess.run(probe, env=env, capture_output=True, timeout=60, check=False).returncode == 1


def _exec_form(value: str) -> list[str]:
    """The argv of `... CMD ["a", "b"]` in a HEALTHCHECK instruction."""
    import json

    return list(json.loads(value[value.index("CMD") + 3 :].strip()))


def test_a_worker_refuses_a_stop_grace_shorter_than_a_node_timeout(
    private_redis: EmbeddedRedis, tmp_path: Path
) -> None:
    graphs = tmp_path / "graphs"
    graphs.mkdir()
    (graphs / "long.yaml").write_text(
        "id: deploy/long\nconfig: {start: a}\nnodes:\n"
        "  a: {action: {tool: sleep, params: {seconds: 1}}, timeout: 600, next: done}\n"
        "  done: {type: return}\n"
    )
    env = {**service_env("worker", private_redis.url), "GRAPHRUNNER_GRAPH_PATH": str(graphs)}
    result = subprocess.run(
        argv_of("worker"), env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 2, result.stderr
    assert "GRAPHRUNNER_STOP_GRACE is 120s" in result.stderr
    assert "node 'a' of graph 'deploy/long'" in result.stderr


def _get(url: str, auth: str | None = None) -> tuple[int, bytes]:
    import base64
    import urllib.error
    import urllib.request

    headers = {"Authorization": "Basic " + base64.b64encode(auth.encode()).decode()} if auth else {}
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=10) as answer:
            return int(answer.status), answer.read()
    except urllib.error.HTTPError as exc:
        return exc.code, b""


def test_flower_as_composed_guards_every_path_and_names_items_once_per_node(
    private_redis: EmbeddedRedis, tmp_path: Path, started: list[Service]
) -> None:
    import json

    from graphrunner.embedded import free_port

    port = free_port()
    argv = [a if not a.startswith("--port=") else f"--port={port}" for a in argv_of("flower")]
    env = service_env("flower", private_redis.url)
    auth = env["FLOWER_BASIC_AUTH"]
    worker = start_worker(0, private_redis, tmp_path, started)
    flower = Service(argv, env, tmp_path / "flower.log")
    started.append(flower)
    worker.wait_for_log(" ready.")
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            if _get(f"{base}/healthcheck")[0] == 200:
                break
        except OSError:
            pass
        assert time.monotonic() < deadline and flower.proc.poll() is None, flower.text()[-3000:]
        time.sleep(0.3)
    for path in ("/metrics", "/api/workers", "/api/tasks", "/", "/tasks", "/workers", "/broker"):
        assert _get(base + path)[0] == 401, path
        assert _get(base + path, "ops:wrong")[0] == 401, path
    assert _get(base + "/metrics", auth)[0] == 200
    graph = ROOT / "graphs" / "foreach.yaml"
    words = [f"w{n}" for n in range(12)]
    with client_of(private_redis) as client:
        parallel = client.submit(_parallel(graph, tmp_path), {"words": words}).wait(timeout=120)
        sequential = client.submit(graph, {"words": words}).wait(timeout=120)
    assert parallel.status == sequential.status == "completed"
    deadline = time.monotonic() + 60
    names: set[str] = set()
    while not any(n.endswith(":item") for n in names):  # Flower has seen the item tasks
        assert time.monotonic() < deadline, names
        time.sleep(0.5)
        names = {t["name"] for t in json.loads(_get(base + "/api/tasks?limit=1000", auth)[1]).values()}
    # a task Flower knows only from its `task-sent` event (a chord's join, sent by a worker) shows
    # the registered task name until its `task-received` event brings the shadow name: both bounded
    assert names <= {
        "examples/foreach:measure",
        "examples/foreach:measure:item",
        "examples/foreach:report",
        "examples/foreach:done",
        STEP_TASK,
        ITEM_TASK,
    }, names
    metrics = _get(base + "/metrics", auth)[1].decode()
    assert "fan[" not in metrics and "measure[" not in metrics


def _parallel(graph: Path, tmp_path: Path) -> Path:
    path = tmp_path / "foreach-parallel.yaml"
    path.write_text(graph.read_text().replace("parallel: false", "parallel: true"))
    return path


@pytest.mark.parametrize(
    ("args", "env", "message"),
    [
        ((), {}, "Flower needs authentication"),
        (("--no-auth", "--address=0.0.0.0"), {}, "not on --address=0.0.0.0"),
        ((), {"FLOWER_BASIC_AUTH": "ops:change-me"}, "example password 'change-me'"),
        (("--basic-auth=ops",), {}, "'ops' is not user:password"),
        ((), {"FLOWER_BASIC_AUTH": "ops:"}, "is not user:password"),
    ],
)
def test_flower_refuses_to_start_open(
    private_redis: EmbeddedRedis, args: tuple[str, ...], env: dict[str, str], message: str
) -> None:
    base = {k: v for k, v in service_env("flower", private_redis.url).items() if k != "FLOWER_BASIC_AUTH"}
    result = subprocess.run(
        [sys.executable, "-m", "graphrunner", "flower", *args],
        env={**base, **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2, result.stdout + result.stderr
    assert message in result.stderr


def test_flower_no_auth_serves_on_loopback_with_a_warning(
    private_redis: EmbeddedRedis, tmp_path: Path, started: list[Service]
) -> None:
    from graphrunner.embedded import free_port

    port = free_port()
    env = {k: v for k, v in service_env("flower", private_redis.url).items() if k != "FLOWER_BASIC_AUTH"}
    flower = Service(
        [sys.executable, "-m", "graphrunner", "flower", "--no-auth", f"--port={port}"],
        env,
        tmp_path / "f.log",
    )
    started.append(flower)
    flower.wait_for_log("without authentication")
    deadline = time.monotonic() + 60
    while True:
        try:
            status = _get(f"http://127.0.0.1:{port}/metrics")[0]
            break
        except OSError:
            assert time.monotonic() < deadline and flower.proc.poll() is None, flower.text()[-3000:]
            time.sleep(0.3)
    assert status == 200
    listening = Path("/proc/net/tcp").read_text().splitlines()[1:]
    local = {line.split()[1] for line in listening if line.split()[3] == "0A"}  # LISTEN
    assert f"0100007F:{port:04X}" in local  # 127.0.0.1
    assert f"00000000:{port:04X}" not in local  # not 0.0.0.0


def _wait_healthy(base: str, service: Service, timeout: float = 60) -> bytes:
    """The body of `/healthcheck` once it answers 200 (the server has started)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            status, body = _get(f"{base}/healthcheck")
            if status == 200:
                return body
        except OSError:
            pass
        assert time.monotonic() < deadline and service.proc.poll() is None, service.text()[-3000:]
        time.sleep(0.3)


def test_the_run_explorer_as_composed_opens_only_its_health_check_without_a_login(
    private_redis: EmbeddedRedis, tmp_path: Path, started: list[Service]
) -> None:
    import json

    from graphrunner.embedded import free_port

    port = free_port()
    argv = [a if not a.startswith("--port=") else f"--port={port}" for a in argv_of("ui")]
    env = service_env("ui", private_redis.url)
    auth = env["GRAPHRUNNER_UI_BASIC_AUTH"].split(",")[0]
    assert "--basic-auth" not in " ".join(argv)  # the users come from the environment only
    ui = Service(argv, env, tmp_path / "ui.log")
    started.append(ui)
    base = f"http://127.0.0.1:{port}"
    assert _wait_healthy(base, ui).strip() == b"OK"
    for path in ("/api/runs", "/", "/api/openapi.json", "/graphs/examples/hello"):
        assert _get(base + path)[0] == 401, path
        assert _get(base + path, "ops:wrong")[0] == 401, path
        assert _get(base + path, "nobody:" + auth.partition(":")[2])[0] == 401, path
    with client_of(private_redis) as client:  # no worker: the run stays pending, in the store
        run_id = client.submit(ROOT / "graphs" / "hello.yaml", {"name": "Ada"}).id
    status, body = _get(base + "/api/runs", auth)
    assert status == 200
    assert [r["run_id"] for r in json.loads(body)["runs"]] == [run_id]
    # the compose health check itself, pointed at this port, exits 0
    healthcheck = composed("ui")["healthcheck"]["test"]  # type: ignore[index]
    assert healthcheck[:2] == ["CMD", "python"]
    probe = [sys.executable, *(a.replace("127.0.0.1:8808", f"127.0.0.1:{port}") for a in healthcheck[2:])]
    answer = subprocess.run(probe, capture_output=True, text=True, timeout=60, check=False)
    assert answer.returncode == 0, answer.stderr
    ui.stop()
    assert subprocess.run(probe, capture_output=True, timeout=60, check=False).returncode != 0


def test_the_run_explorer_as_composed_refuses_to_start_without_its_users(
    private_redis: EmbeddedRedis,
) -> None:
    env = {k: v for k, v in service_env("ui", private_redis.url).items() if k != "GRAPHRUNNER_UI_BASIC_AUTH"}
    result = subprocess.run(argv_of("ui"), env=env, capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "the run explorer needs authentication" in result.stderr


# -- secure by default: Redis's password never in argv, placeholders refused, least privilege ---

needs_redis_binaries = pytest.mark.skipif(
    shutil.which("redis-server") is None or shutil.which("redis-cli") is None,
    reason="the compose redis command runs the system redis-server and redis-cli",
)


def redis_as_composed(port: int, data: Path, **env: str) -> tuple[list[str], dict[str, str]]:
    """The redis service's entrypoint and command, on a loopback `port` with its files in `data`,
    and its container environment (`env` overrides it)."""
    service = composed("redis")
    argv = argv_of_service(service)
    script = argv[-1].replace(
        "exec redis-server - ", f"exec redis-server - --port {port} --bind 127.0.0.1 --dir {data} ", 1
    )
    assert script != argv[-1]
    environment: dict[str, object] = service["environment"]  # type: ignore[assignment]
    container_env = {"PATH": os.environ["PATH"], **{k: str(v) for k, v in environment.items()}, **env}
    return [*argv[:-1], script], container_env


def _healthcheck(port: int, env: dict[str, str]) -> int:
    test = composed("redis")["healthcheck"]["test"]  # type: ignore[index]
    assert test[0] == "CMD-SHELL"
    command = test[1].replace("redis-cli ", f"redis-cli -p {port} ", 1)
    return subprocess.run(["/bin/sh", "-c", command], env=env, timeout=30, check=False).returncode


@needs_redis_binaries
def test_redis_as_composed_reads_its_password_from_stdin_never_argv(
    tmp_path: Path, started: list[Service]
) -> None:
    import redis

    port = free_port()
    argv, env = redis_as_composed(port, tmp_path)
    assert env["REDIS_PASSWORD"] == SECRET
    server = Service(argv, env, tmp_path / "redis.log")
    started.append(server)
    client = redis.Redis(port=port, password=SECRET, socket_timeout=5)
    deadline = time.monotonic() + 30
    while True:
        try:
            client.ping()
            break
        except redis.ConnectionError:
            assert time.monotonic() < deadline and server.proc.poll() is None, server.text()
            time.sleep(0.1)
    # the shell exec'd redis-server: it is the container's PID 1 and gets docker stop's SIGTERM
    assert Path(f"/proc/{server.proc.pid}/exe").resolve().name.startswith("redis")
    cmdline = Path(f"/proc/{server.proc.pid}/cmdline").read_bytes()
    assert SECRET.encode() not in cmdline and b"requirepass" not in cmdline
    with pytest.raises(redis.AuthenticationError):
        redis.Redis(port=port, socket_timeout=5).ping()
    options = redis_server_options(argv_of_service(composed("redis"))[-1])
    assert client.config_get("appendonly")["appendonly"] == options["--appendonly"] == "yes"
    assert client.config_get("appendfsync")["appendfsync"] == "everysec"
    assert client.config_get("maxmemory-policy")["maxmemory-policy"] == "noeviction"
    assert int(client.config_get("maxmemory")["maxmemory"]) == 768 * 1024**2
    assert _healthcheck(port, env) == 0
    assert _healthcheck(port, {**env, "REDISCLI_AUTH": "wrong"}) != 0  # NOAUTH is not healthy
    server.proc.terminate()
    assert server.proc.wait(timeout=30) == 0, server.text()
    assert list(tmp_path.glob("appendonlydir/*.aof"))


@needs_redis_binaries
@pytest.mark.parametrize("password", ["change-me", "CHANGE-ME", "changeme", "", "two words", "p@ss/word"])
def test_redis_as_composed_refuses_a_placeholder_or_unusable_password(tmp_path: Path, password: str) -> None:
    port = free_port()
    argv, env = redis_as_composed(port, tmp_path, REDIS_PASSWORD=password)
    result = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=30, check=False)
    assert result.returncode == 64, result.stdout + result.stderr
    assert "REDIS_PASSWORD" in result.stderr and "openssl rand -hex 24" in result.stderr
    assert not list(tmp_path.iterdir())  # no server ever started


@pytest.mark.parametrize("name", ["worker", "beat", "flower", "ui"])
def test_every_graphrunner_service_refuses_the_unchanged_example_file(name: str) -> None:
    """.env.example copied as is: nothing comes up with a password everyone knows."""
    service = load_compose(read_env_file())["services"][name]
    env = {**image_env(), **{k: local_path(str(v)) for k, v in service["environment"].items()}}
    assert ":change-me@redis:" in env["GRAPHRUNNER_REDIS_URL"]
    # no traffic beyond loopback: the same URL, on a loopback port nobody listens on
    env["GRAPHRUNNER_REDIS_URL"] = f"redis://:change-me@127.0.0.1:{free_port()}/0"
    argv = [sys.executable, "-m", "graphrunner", *command_of(service)[1:]]
    result = subprocess.run(
        argv, env={**os.environ, **env}, capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 2, result.stdout + result.stderr
    assert "change-me" in result.stderr


def test_the_example_producer_as_composed_runs_with_the_shipped_grants(
    private_redis: EmbeddedRedis, tmp_path: Path, started: list[Service]
) -> None:
    """GRAPHRUNNER_DEFAULT_CAPABILITIES of .env.example: the producer's graph (a shell step) and the
    example tools' graph complete; a graph that needs a tool it does not grant is refused."""
    worker = start_worker(0, private_redis, tmp_path, started)
    worker.wait_for_log(" ready.")
    env = service_env("producer", private_redis.url)
    argv = command_of(composed("producer"))
    assert argv[:2] == ["python", "/app/workers/example_producer.py"]
    runs = [a if a != "20" else "3" for a in argv[2:]]
    result = subprocess.run(
        [sys.executable, local_path(argv[1]), *runs], env=env, capture_output=True, text=True, timeout=240
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "3 of 3 runs of examples/hello completed" in result.stdout
    grants = tuple(p for p in env["GRAPHRUNNER_DEFAULT_CAPABILITIES"].split(",") if p)
    settings = Settings(redis_url=private_redis.url, default_capabilities=grants)
    with Client(settings=settings) as client:
        slug = client.submit(
            ROOT / "workers" / "example_tools" / "graphs" / "slugify.yaml", {"title": "Hi there"}
        )
        refused = client.submit(graph_file(tmp_path, 0, 1), {})
        assert slug.wait(timeout=120).status == "completed"
        denied = refused.wait(timeout=120)
    assert denied.status == "failed" and "permission_denied" in str(denied.error)
