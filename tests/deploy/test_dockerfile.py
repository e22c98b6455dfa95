"""workers/Dockerfile, parsed (there is no Docker daemon to build it): a slim Python base, the
project and the example tools installed, a non-root user, a health check that reads the worker's
liveness file."""

from __future__ import annotations

import json
import re
from pathlib import Path

from compose_files import ROOT
from dockerfile_parse import DockerfileParser

DOCKERFILE = ROOT / "workers" / "Dockerfile"


def parsed() -> DockerfileParser:
    return DockerfileParser(path=str(DOCKERFILE))


def instructions(name: str) -> list[str]:
    return [i["value"] for i in parsed().structure if i["instruction"] == name]


def test_slim_python_base_that_the_project_supports_pinned_to_a_release() -> None:
    """An exact Python release and Debian suite (a digest may follow), never a moving tag."""
    base = parsed().baseimage
    match = re.fullmatch(r"python:3\.(\d+)\.\d+-slim-(bookworm|trixie)(@sha256:[0-9a-f]{64})?", base)
    assert match and int(match.group(1)) >= 11, base


def test_installs_the_project_and_the_example_tools_plugin() -> None:
    runs = " ".join(instructions("RUN"))
    assert "pip install '.[otel]'" in runs  # with the OpenTelemetry SDK: OTEL_* turns it on
    assert "pip install --no-deps ./workers/example_tools" in runs
    copied = [c.split()[0] for c in instructions("COPY")]
    for source in copied:  # every COPY source exists in the build context (the repo root)
        assert (ROOT / source).exists(), source


def test_runs_as_a_non_root_user_and_group_with_fixed_ids() -> None:
    users = instructions("USER")
    assert users and re.fullmatch(r"\d+:\d+", users[-1]), users
    uid, gid = users[-1].split(":")
    assert uid != "0" and gid != "0"
    runs = " ".join(instructions("RUN"))
    assert f"useradd --system --uid {uid} --gid {gid}" in runs and f"groupadd --system --gid {gid}" in runs


def test_environment_names_files_the_image_has() -> None:
    env = parsed().envs
    assert env["GRAPHRUNNER_TASK_EVENTS"] == "1"
    workdir = instructions("WORKDIR")[-1]
    for key in ("GRAPHRUNNER_GRAPH_PATH", "GRAPHRUNNER_WORKER_CONFIG"):
        inside = Path(env[key]).relative_to(workdir)
        assert (ROOT / inside).exists(), key


def test_health_check_reads_the_liveness_file_without_the_network() -> None:
    """`graphrunner alive`, not `ping --local` (over the broker): a Redis outage restarts no worker."""
    (check,) = instructions("HEALTHCHECK")
    argv = json.loads(check[check.index("CMD") + 3 :].strip())
    assert argv[:2] == ["graphrunner", "alive"]
    max_age = float(argv[argv.index("--max-age") + 1])
    assert max_age >= 30  # several of the worker's touches (every 5 s) may be missed
    interval = re.search(r"--interval=(\d+)s", check)
    assert interval and max_age >= int(interval.group(1))
    assert re.search(r"--timeout=(\d+)s", check)


def test_default_command_is_a_worker_with_warm_shutdown() -> None:
    assert json.loads(instructions("CMD")[-1])[:2] == ["graphrunner", "worker"]
    assert instructions("STOPSIGNAL") == ["SIGTERM"]


def test_the_otel_extra_the_image_installs_is_the_projects() -> None:
    """`pip install '.[otel]'` only warns about an extra the project does not define: check it does."""
    import tomllib

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert "otel" in extras, "pyproject.toml defines no `otel` extra (the image installs '.[otel]')"
    assert any(r.startswith("opentelemetry-sdk") for r in extras["otel"])
