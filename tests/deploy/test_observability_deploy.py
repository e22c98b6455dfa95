"""The observability deployment (issue 26): the compose `observability` profile and
docker-compose.observability.yml, the configuration in deploy/observability/ (OpenTelemetry
Collector, Prometheus, Grafana and its dashboard), and the Kubernetes pieces (the workers' metrics
port, the PodMonitor, the dashboard ConfigMap, the OTEL_* settings, the network policy).

No daemon, no cluster, no network: the Compose Specification schema, Kubernetes' schemas
(kubernetes-validate), a PodMonitor schema written from the CRD (podmonitor.schema.json), the
files parsed and checked against each other, and `kubectl kustomize` (offline) when installed.
There is no promtool or otelcol here: their configurations are checked structurally.
"""

from __future__ import annotations

import copy
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import jsonschema
import pytest
import test_kubernetes as k8s
import yaml
from compose_files import (
    COMPOSE,
    COMPOSE_OBSERVABILITY,
    OBSERVABILITY,
    ROOT,
    argv_of_service,
    command_of,
    load_compose,
    load_observability,
    load_with_observability,
    read_env_file,
)
from test_compose import compose_schema

Doc = dict[str, Any]

HERE = Path(__file__).resolve().parent
OBS = ROOT / "deploy" / "observability"
COLLECTOR_CONFIG = OBS / "otel-collector.yaml"
PROMETHEUS_CONFIG = OBS / "prometheus.yml"
GRAFANA = OBS / "grafana"
DASHBOARD = GRAFANA / "dashboards" / "graphrunner.json"
PODMONITOR = OBS / "podmonitor.yaml"
PODMONITOR_SCHEMA = HERE / "podmonitor.schema.json"
COMPONENT = OBS / "kustomization.yaml"

PROFILE = "observability"
TELEMETRY_SERVICES = {"worker": "graphrunner-worker", "beat": "graphrunner-beat", "ui": "graphrunner-ui"}
METRICS_PORT = 9464
METRICS_OPTIONS = ["--metrics-port", str(METRICS_PORT), "--metrics-host", "0.0.0.0"]

# The Prometheus series graphrunner's workers expose (names final, issue 26), with their labels.
# Every series also carries the scrape's job and instance; histograms their le.
METRICS: dict[str, set[str]] = {
    "graphrunner_steps_total": {"graph", "node", "outcome"},
    "graphrunner_step_duration_seconds_bucket": {"graph", "node", "outcome", "le"},
    "graphrunner_step_queue_wait_seconds_bucket": {"graph", "node", "queue", "le"},
    "graphrunner_runs_finished_total": {"graph", "status"},
    "graphrunner_runs_in_flight": {"status"},
    "graphrunner_foreach_items_total": {"graph", "node", "outcome"},
    "graphrunner_foreach_item_duration_seconds_bucket": {"graph", "node", "outcome", "le"},
    "graphrunner_retries_total": {"graph", "node"},
    "graphrunner_redeliveries_total": {"what"},
    "graphrunner_dead_letters_total": {"reason"},
    "graphrunner_sweeper_repairs_total": {"kind"},
    "graphrunner_timers_due_total": set(),
}
SCRAPE_LABELS = {"job", "instance"}


def load_yaml(path: Path) -> Doc:
    doc: Doc = yaml.safe_load(path.read_text())
    return doc


def validate_compose(doc: Doc) -> None:
    schema = compose_schema()
    jsonschema.validators.validator_for(schema)(schema).validate(doc)


def host_port(published: str) -> tuple[str, int, int]:
    """`IP:HOST:CONTAINER` as compose writes a published port."""
    ip, host, container = published.rsplit(":", 2)
    return ip, int(host), int(container)


# -- docker compose: the profile, and the file that turns telemetry on ---------------------------


def test_both_compose_files_and_their_merge_are_valid_against_the_compose_specification() -> None:
    validate_compose(yaml.safe_load(COMPOSE.read_text()))
    validate_compose(yaml.safe_load(COMPOSE_OBSERVABILITY.read_text()))
    validate_compose(load_compose())
    validate_compose(load_observability())
    validate_compose(load_with_observability())
    broken = load_with_observability()
    broken["services"]["grafana"]["profile"] = [PROFILE]  # `profiles`, misspelled
    with pytest.raises(jsonschema.ValidationError, match="profile"):
        validate_compose(broken)


def test_check_jsonschema_cli_accepts_the_observability_file() -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "check_jsonschema",
            "--builtin-schema",
            "vendor.compose-spec",
            str(COMPOSE_OBSERVABILITY),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_observability_services_start_only_with_the_profile() -> None:
    services = load_compose()["services"]
    for name in OBSERVABILITY:
        assert services[name]["profiles"] == [PROFILE], name
    default = {name for name, s in services.items() if not s.get("profiles")}
    assert default == {"redis", "worker", "beat", "flower", "ui"}  # `docker compose up` as before
    assert [n for n, s in services.items() if PROFILE in s.get("profiles", [])] == list(OBSERVABILITY)


def test_without_the_observability_file_nothing_is_exported() -> None:
    """docker-compose.yml alone: no OTEL_* variable anywhere, no metrics port, no trace link."""
    for name, service in load_compose()["services"].items():
        environment = service.get("environment", {})
        assert not [k for k in environment if k.startswith("OTEL_")], name
        assert "GRAPHRUNNER_TRACE_URL" not in environment, name
        assert not [a for a in command_of(service) if a.startswith("--metrics")], name
    raw = COMPOSE.read_text()
    assert "OTEL_TRACES_EXPORTER" not in raw and "OTEL_METRICS_EXPORTER" not in raw


def test_the_default_up_needs_no_observability_variable() -> None:
    """An .env written before observability existed still starts the default services."""
    names = ("GRAFANA_", "JAEGER_", "PROMETHEUS_", "OTEL_", "COMPOSE_")
    env = {k: v for k, v in read_env_file().items() if not k.startswith(names)}
    services = load_compose(env)["services"]
    assert services["grafana"]["environment"]["GF_SECURITY_ADMIN_PASSWORD"] == ""  # refused at start


def test_the_observability_file_only_turns_telemetry_on() -> None:
    """It touches the worker, beat and the explorer, and only their environment (and the worker's command)."""
    services = load_observability()["services"]
    assert set(services) == set(TELEMETRY_SERVICES)
    for name, service in services.items():
        allowed = {"environment", "command"} if name == "worker" else {"environment"}
        assert set(service) <= allowed, name
    assert yaml.safe_load(COMPOSE_OBSERVABILITY.read_text())["name"] == load_compose()["name"]


@pytest.mark.parametrize("name", sorted(TELEMETRY_SERVICES))
def test_graphrunner_processes_get_the_standard_otel_variables(name: str) -> None:
    environment = load_with_observability()["services"][name]["environment"]
    assert environment["OTEL_SERVICE_NAME"] == TELEMETRY_SERVICES[name]
    assert environment["OTEL_TRACES_EXPORTER"] == "otlp"
    assert environment["OTEL_EXPORTER_OTLP_PROTOCOL"] == "http/protobuf"
    endpoint = urlsplit(environment["OTEL_EXPORTER_OTLP_ENDPOINT"])
    assert (endpoint.scheme, endpoint.hostname, endpoint.port) == ("http", "otel-collector", 4318)
    http = load_yaml(COLLECTOR_CONFIG)["receivers"]["otlp"]["protocols"]["http"]["endpoint"]
    assert http.endswith(f":{endpoint.port}")  # http/protobuf goes to the collector's HTTP receiver
    assert endpoint.hostname in load_compose()["services"]
    # the worker's metrics are scraped from its metrics port: over OTLP too, counted twice
    expected = "none" if name == "worker" else "otlp"
    assert environment["OTEL_METRICS_EXPORTER"] == expected
    # the rest of the service's environment is docker-compose.yml's
    base = load_compose()["services"][name]["environment"]
    assert {k: v for k, v in environment.items() if k in base} == base


def test_the_worker_serves_its_metrics_where_prometheus_scrapes_them() -> None:
    worker = load_with_observability()["services"]["worker"]
    base = command_of(load_compose()["services"]["worker"])
    assert command_of(worker) == base + METRICS_OPTIONS  # the same command, with its metrics port
    assert "ports" not in worker  # on the compose network only
    (job,) = [
        j for j in load_yaml(PROMETHEUS_CONFIG)["scrape_configs"] if j["job_name"] == "graphrunner-worker"
    ]
    (discovery,) = job["dns_sd_configs"]
    assert discovery == {**discovery, "names": ["worker"], "type": "A", "port": METRICS_PORT}


def test_the_explorer_links_runs_to_their_trace_in_jaeger() -> None:
    env = read_env_file()
    merged = load_with_observability(env)["services"]
    link = merged["ui"]["environment"]["GRAPHRUNNER_TRACE_URL"]
    assert link == f"http://127.0.0.1:{env['JAEGER_UI_PORT']}/trace/{{trace_id}}"
    assert f"127.0.0.1:{env['JAEGER_UI_PORT']}:16686" in merged["jaeger"]["ports"]
    moved = load_with_observability({**env, "JAEGER_UI_PORT": "26686"})["services"]
    assert moved["ui"]["environment"]["GRAPHRUNNER_TRACE_URL"].startswith("http://127.0.0.1:26686/")
    assert moved["jaeger"]["ports"] == ["127.0.0.1:26686:16686"]


def test_every_observability_port_is_published_on_loopback_only() -> None:
    env = read_env_file()
    unset = {k: v for k, v in env.items() if not k.endswith("_PORT")}
    expected = {
        "otel-collector": {4317, 4318},
        "jaeger": {16686},
        "prometheus": {9090},
        "grafana": {3000},
    }
    for variables in (env, unset):
        services = load_compose(variables)["services"]
        for name in OBSERVABILITY:
            published = [host_port(p) for p in services[name].get("ports", [])]
            assert {ip for ip, _, _ in published} == {"127.0.0.1"}, name
            assert {container for _, _, container in published} == expected[name], name
    assert {p for s in load_compose(unset)["services"].values() for p in s.get("ports", [])} >= {
        "127.0.0.1:16686:16686",
        "127.0.0.1:3000:3000",
        "127.0.0.1:9090:9090",
        "127.0.0.1:4317:4317",
        "127.0.0.1:4318:4318",
    }


def test_the_observability_images_are_pinned_to_exact_releases() -> None:
    services = load_compose()["services"]
    images = {name: services[name]["image"] for name in OBSERVABILITY}
    assert images["otel-collector"].startswith("otel/opentelemetry-collector-contrib:")
    assert images["jaeger"].startswith("jaegertracing/jaeger:")
    assert images["prometheus"].startswith("prom/prometheus:")
    assert images["grafana"].startswith("grafana/grafana:")
    for image in images.values():
        assert re.fullmatch(r"[a-z0-9./-]+:v?\d+\.\d+\.\d+(@sha256:[0-9a-f]{64})?", image), image


def bind_mounts(service: Doc) -> list[tuple[Path, str]]:
    """(host path, container path) of a service's bind mounts, each required read-only."""
    found = []
    for volume in service.get("volumes", []):
        source, target, *mode = str(volume).split(":")
        if source.startswith("./"):
            assert mode == ["ro"], volume
            found.append((ROOT / source, target))
    return found


def test_the_mounted_configuration_exists() -> None:
    services = load_compose()["services"]
    mounts = {name: dict((t, s) for s, t in bind_mounts(services[name])) for name in OBSERVABILITY}
    assert mounts["otel-collector"] == {"/etc/otelcol-contrib/config.yaml": COLLECTOR_CONFIG}
    assert "--config=/etc/otelcol-contrib/config.yaml" in command_of(services["otel-collector"])
    assert mounts["prometheus"] == {"/etc/prometheus/prometheus.yml": PROMETHEUS_CONFIG}
    assert "--config.file=/etc/prometheus/prometheus.yml" in command_of(services["prometheus"])
    assert mounts["grafana"] == {
        "/etc/grafana/provisioning": GRAFANA / "provisioning",
        "/etc/grafana/dashboards": GRAFANA / "dashboards",
    }
    assert mounts["jaeger"] == {}
    for name in OBSERVABILITY:
        assert all(path.exists() for path in mounts[name].values()), name


def grafana_script() -> list[str]:
    argv = argv_of_service(load_compose()["services"]["grafana"])
    assert argv[:2] == ["/bin/sh", "-ec"] and len(argv) == 3
    assert argv[2].rstrip().endswith("exec /run.sh")  # the image's entrypoint, PID 1
    return argv


@pytest.mark.parametrize("password", ["", "change-me", "Change-Me", "admin", "placeholder"])
def test_grafana_refuses_an_empty_or_placeholder_admin_password(password: str) -> None:
    argv = grafana_script()
    env = {"PATH": "/usr/bin:/bin", "GF_SECURITY_ADMIN_PASSWORD": password}
    result = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=30, check=False)
    assert result.returncode == 64, result.stdout + result.stderr
    assert "GRAFANA_ADMIN_PASSWORD" in result.stderr


def test_grafana_starts_with_a_real_admin_password_from_the_environment_only() -> None:
    argv = grafana_script()
    argv[2] = argv[2].replace("exec /run.sh", "exec echo started")
    env = {"PATH": "/usr/bin:/bin", "GF_SECURITY_ADMIN_PASSWORD": "a-real-password-0123"}
    result = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=30, check=False)
    assert (result.returncode, result.stdout) == (0, "started\n"), result.stderr
    grafana = load_compose({**read_env_file(), "GRAFANA_ADMIN_PASSWORD": "s3cret"})["services"]["grafana"]
    assert grafana["environment"]["GF_SECURITY_ADMIN_PASSWORD"] == "s3cret"
    assert not [a for a in argv_of_service(grafana) if "s3cret" in a]
    assert grafana["environment"]["GF_AUTH_ANONYMOUS_ENABLED"] == "false"


# -- the OpenTelemetry Collector's configuration ------------------------------------------------

# components of otel/opentelemetry-collector-contrib this configuration may use
COLLECTOR_COMPONENTS = {
    "receivers": {"otlp"},
    "processors": {"memory_limiter", "batch"},
    "exporters": {"otlp_grpc", "otlp_http", "prometheus", "prometheusremotewrite", "debug"},
    "extensions": {"health_check"},
}
SIGNALS = {"traces", "metrics", "logs"}


def test_the_collector_pipelines_use_only_defined_components() -> None:
    config = load_yaml(COLLECTOR_CONFIG)
    assert set(config) <= {*COLLECTOR_COMPONENTS, "connectors", "service"}
    for kind, known in COLLECTOR_COMPONENTS.items():
        for component in config.get(kind) or {}:
            assert component.split("/")[0] in known, f"{kind}: {component}"
    pipelines = config["service"]["pipelines"]
    used: dict[str, set[str]] = {"receivers": set(), "processors": set(), "exporters": set()}
    for name, pipeline in pipelines.items():
        assert name.split("/")[0] in SIGNALS, name
        assert set(pipeline) <= set(used) and pipeline["receivers"] and pipeline["exporters"], name
        for kind, components in pipeline.items():
            assert len(components) == len(set(components)), name
            missing = [c for c in components if c not in (config.get(kind) or {})]
            assert missing == [], f"pipeline {name} names undefined {kind}: {missing}"
            used[kind] |= set(components)
    for kind, components in used.items():
        assert set(config.get(kind) or {}) == components, f"{kind} defined but in no pipeline"
    assert set(config["service"].get("extensions", [])) == set(config.get("extensions") or {})


def test_the_collector_receives_otlp_and_sends_traces_to_jaeger_and_metrics_to_prometheus() -> None:
    config = load_yaml(COLLECTOR_CONFIG)
    protocols = config["receivers"]["otlp"]["protocols"]
    assert protocols["grpc"]["endpoint"] == "0.0.0.0:4317"
    assert protocols["http"]["endpoint"] == "0.0.0.0:4318"
    pipelines = config["service"]["pipelines"]
    (traces,) = pipelines["traces"]["exporters"]
    host, port = config["exporters"][traces]["endpoint"].rsplit(":", 1)
    assert traces.startswith("otlp_grpc/") and (host, port) == ("jaeger", "4317")  # Jaeger's OTLP gRPC
    assert host in load_compose()["services"]
    assert config["exporters"][traces]["tls"] == {"insecure": True}  # the compose network only
    assert pipelines["metrics"]["exporters"] == ["prometheus"]
    assert pipelines["traces"]["processors"][0] == pipelines["metrics"]["processors"][0] == "memory_limiter"


def collector_ports() -> dict[str, int]:
    """The ports the collector serves Prometheus on: its exporter's and its own metrics'."""
    config = load_yaml(COLLECTOR_CONFIG)
    exporter = int(config["exporters"]["prometheus"]["endpoint"].rsplit(":", 1)[1])
    (reader,) = config["service"]["telemetry"]["metrics"]["readers"]
    internal = reader["pull"]["exporter"]["prometheus"]
    assert internal["host"] == "0.0.0.0"
    return {"exporter": exporter, "internal": int(internal["port"])}


# -- Prometheus ---------------------------------------------------------------------------------

SCRAPE_KEYS = {
    "job_name",
    "metrics_path",
    "honor_labels",
    "static_configs",
    "dns_sd_configs",
    "scrape_interval",
}


def scrape_targets() -> dict[str, list[str]]:
    """Each job's targets as host:port (DNS discovery written as its names and port)."""
    config = load_yaml(PROMETHEUS_CONFIG)
    assert set(config) <= {"global", "scrape_configs", "rule_files"}
    jobs: dict[str, list[str]] = {}
    for job in config["scrape_configs"]:
        assert set(job) <= SCRAPE_KEYS, job["job_name"]
        assert job["job_name"] not in jobs
        targets = [t for static in job.get("static_configs", []) for t in static["targets"]]
        targets += [f"{n}:{d['port']}" for d in job.get("dns_sd_configs", []) for n in d["names"]]
        jobs[job["job_name"]] = targets
    return jobs


def test_prometheus_scrapes_every_worker_and_the_collector() -> None:
    config = load_yaml(PROMETHEUS_CONFIG)
    assert re.fullmatch(r"\d+s", config["global"]["scrape_interval"])
    jobs = scrape_targets()
    ports = collector_ports()
    assert jobs["graphrunner-worker"] == [f"worker:{METRICS_PORT}"]
    assert jobs["otel-collector"] == [f"otel-collector:{ports['exporter']}"]
    assert jobs["otel-collector-internal"] == [f"otel-collector:{ports['internal']}"]
    (collector,) = [j for j in config["scrape_configs"] if j["job_name"] == "otel-collector"]
    assert collector["honor_labels"] is True  # the exporter's job and instance (service.name, .instance.id)
    services = load_compose()["services"]
    for job, targets in jobs.items():
        for target in targets:
            host = target.rsplit(":", 1)[0]
            assert host == "localhost" or host in services, f"{job}: {target}"
    listen = [a for a in command_of(services["prometheus"]) if a.startswith("--web.listen-address=")]
    assert listen == ["--web.listen-address=0.0.0.0:9090"]


# -- Grafana: provisioning and the dashboard ----------------------------------------------------


def dashboard() -> Doc:
    doc: Doc = json.loads(DASHBOARD.read_text())
    return doc


def test_grafana_provisions_the_prometheus_data_source() -> None:
    (source,) = load_yaml(GRAFANA / "provisioning" / "datasources" / "prometheus.yaml")["datasources"]
    assert source["type"] == "prometheus" and source["access"] == "proxy"
    url = urlsplit(source["url"])
    assert (url.hostname, url.port) == ("prometheus", 9090)
    assert url.hostname in load_compose()["services"]
    assert [p.name for p in (GRAFANA / "provisioning" / "datasources").iterdir()] == ["prometheus.yaml"]


def test_grafana_provisions_the_dashboard_from_where_compose_mounts_it() -> None:
    files = list((GRAFANA / "provisioning" / "dashboards").iterdir())
    assert [f.name for f in files] == ["graphrunner.yaml"]
    provisioning = load_yaml(files[0])
    assert provisioning["apiVersion"] == 1
    (provider,) = provisioning["providers"]
    assert provider["type"] == "file"
    grafana = load_compose()["services"]["grafana"]
    mounted = {target: source for source, target in bind_mounts(grafana)}
    directory = mounted[provider["options"]["path"]]  # the provider's path is a mount of this repository
    assert directory == DASHBOARD.parent and sorted(p.name for p in directory.iterdir()) == [DASHBOARD.name]
    home = grafana["environment"]["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]
    assert home == f"{provider['options']['path']}/{DASHBOARD.name}"


def test_the_dashboard_parses_and_has_its_template_variables() -> None:
    board = dashboard()
    assert board["uid"] == "graphrunner" and board["title"]
    variables = {v["name"]: v for v in board["templating"]["list"]}
    assert set(variables) == {"datasource", "graph", "node"}
    assert (variables["datasource"]["type"], variables["datasource"]["query"]) == ("datasource", "prometheus")
    for name in ("graph", "node"):
        variable = variables[name]
        assert variable["type"] == "query" and variable["multi"] and variable["includeAll"], name
        assert variable["allValue"] == ".*", name
        query = variable["query"]["query"]
        assert query == variable["definition"], name
        assert re.fullmatch(rf"label_values\((\w+)(\{{[^}}]*\}})?, {name}\)", query), query
    assert '{graph=~"$graph"}' in variables["node"]["query"]["query"]  # nodes of the chosen graphs


def panels() -> list[Doc]:
    return [p for p in dashboard()["panels"] if p["type"] != "row"]


def expressions() -> list[str]:
    return [t["expr"] for p in panels() for t in p["targets"]]


PROMQL_WORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and", "or", "unless"}


def metric_names(expr: str) -> set[str]:
    """The series an expression reads: every name that is not a function, keyword or label."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)  # string literals
    text = re.sub(r"\{[^}]*\}", "", text)  # label matchers
    text = re.sub(r"\[[^\]]*\]", "", text)  # ranges
    text = re.sub(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", text)
    names = re.findall(r"(?<![\w$.])[a-zA-Z_:][a-zA-Z0-9_:]*\b(?!\s*\()", text)
    return {n for n in names if n not in PROMQL_WORDS}


def selectors(expr: str) -> list[tuple[str, set[str]]]:
    """(metric, the labels its matchers name) of every `metric{...}` of an expression."""
    return [
        (metric, set(re.findall(r'(\w+)\s*(?:=~|!~|!=|=)\s*"', matchers)))
        for metric, matchers in re.findall(r"([a-zA-Z_:][a-zA-Z0-9_:]*)\{([^}]*)\}", expr)
    ]


def test_the_dashboards_metrics_are_the_ones_workers_expose() -> None:
    """METRICS above, derived from graphrunner's instruments as its Prometheus endpoint names them
    (the OTel collector's Prometheus exporter gives the same names)."""
    from graphrunner.telemetry.metrics import INSTRUMENTS
    from graphrunner.telemetry.prometheus import prometheus_name

    exposed = {}
    for instrument in INSTRUMENTS:
        histogram = instrument.kind == "histogram"
        name = prometheus_name(instrument) + ("_bucket" if histogram else "")
        exposed[name] = set(instrument.labels) | ({"le"} if histogram else set())
    assert exposed == METRICS


def test_the_metric_name_parser_finds_names_and_only_names() -> None:
    expr = (
        'histogram_quantile(0.95, sum by (le, queue) (rate(a_seconds_bucket{graph=~"$graph"}[$__rate_interval])))'
        " / on (queue) group_left b_total + max(c) or vector(0)"
    )
    assert metric_names(expr) == {"a_seconds_bucket", "b_total", "c"}
    assert selectors(expr) == [("a_seconds_bucket", {"graph"})]


def test_every_panel_query_reads_only_graphrunners_metrics_and_their_labels() -> None:
    used: set[str] = set()
    for expr in expressions():
        names = metric_names(expr)
        assert names and names <= set(METRICS), f"unknown series {names - set(METRICS)} in {expr}"
        used |= names
        for metric, labels in selectors(expr):
            assert labels <= METRICS[metric] | SCRAPE_LABELS, f"{metric} has no {labels - METRICS[metric]}"
        for grouping in re.findall(r"\bby\s*\(([^)]*)\)", expr):
            labels = {g.strip() for g in grouping.split(",")}
            assert labels <= set().union(*(METRICS[n] for n in names)) | SCRAPE_LABELS, expr
    assert used == set(METRICS)  # a panel for every metric
    for variable in dashboard()["templating"]["list"][1:]:  # label_values(metric{...}, label)
        match = re.fullmatch(r"label_values\((\w+)(\{[^}]*\})?, (\w+)\)", variable["query"]["query"])
        assert match and match[3] in METRICS[match[1]], variable["query"]["query"]


def test_quantiles_are_taken_over_buckets_by_le() -> None:
    quantiles = [e for e in expressions() if "histogram_quantile" in e]
    assert {q for e in quantiles for q in re.findall(r"histogram_quantile\((0\.\d+)", e)} == {"0.5", "0.95"}
    for expr in quantiles:
        assert all(n.endswith("_bucket") for n in metric_names(expr)), expr
        assert re.search(r"by \(le\b", expr), expr
    histograms = {n for n in METRICS if n.endswith("_bucket")}
    assert histograms <= {n for e in quantiles for n in metric_names(e)}


def test_the_dashboard_answers_the_issues_questions() -> None:
    exprs = expressions()
    assert [e for e in exprs if 'outcome="error"' in e and "graphrunner_steps_total" in e]  # failure rate
    assert [e for e in exprs if "graphrunner_step_queue_wait_seconds_bucket" in e and "0.95" in e]
    assert [
        e for e in exprs if e.startswith("max by (status) (graphrunner_runs_in_flight")
    ]  # max across workers
    steps = [e for e in exprs if e.startswith("sum by (graph, node) (rate(graphrunner_steps_total")]
    assert steps  # steps per second by graph and node
    for expr in exprs:  # counters as rates, never raw
        for name in metric_names(expr):
            if name.endswith(("_total", "_bucket")):
                assert re.search(rf"(rate|increase)\({name}\b", expr), expr


def test_every_panel_uses_the_data_source_variable_and_fits_the_grid() -> None:
    ids = [p["id"] for p in dashboard()["panels"]]
    assert len(ids) == len(set(ids))
    for panel in panels():
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, panel["title"]
        assert all(t["datasource"] == panel["datasource"] for t in panel["targets"]), panel["title"]
        grid = panel["gridPos"]
        assert grid["x"] + grid["w"] <= 24 and grid["h"] > 0, panel["title"]
        assert len({t["refId"] for t in panel["targets"]}) == len(panel["targets"])


# -- Kubernetes ---------------------------------------------------------------------------------


def worker() -> Doc:
    return k8s.container(k8s.one("Deployment", "graphrunner-worker"), "worker")


def podmonitor() -> Doc:
    (doc,) = [d for d in yaml.safe_load_all(PODMONITOR.read_text()) if d]
    return doc  # type: ignore[no-any-return]


def podmonitor_validator() -> jsonschema.Draft202012Validator:
    schema = json.loads(PODMONITOR_SCHEMA.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def test_the_worker_serves_metrics_on_a_named_port() -> None:
    args = worker()["args"]
    assert args[:2] == ["graphrunner", "worker"]
    at = args.index("--metrics-port")
    assert args[at : at + 4] == METRICS_OPTIONS  # every interface of the pod: Prometheus connects to it
    assert {"name": "metrics", "containerPort": METRICS_PORT} in worker()["ports"]


def test_the_worker_pods_carry_the_prometheus_annotations() -> None:
    annotations = k8s.one("Deployment", "graphrunner-worker")["spec"]["template"]["metadata"]["annotations"]
    (endpoint,) = podmonitor()["spec"]["podMetricsEndpoints"]
    assert annotations == {
        "prometheus.io/scrape": "true",
        "prometheus.io/port": str(METRICS_PORT),
        "prometheus.io/path": endpoint["path"],
    }


def test_the_podmonitor_matches_its_schema() -> None:
    podmonitor_validator().validate(podmonitor())


BROKEN_PODMONITOR: dict[str, Any] = {
    "misspelled spec field": lambda d: d["spec"].update(
        podMetricEndpoints=d["spec"].pop("podMetricsEndpoints")
    ),
    "unknown endpoint field": lambda d: d["spec"]["podMetricsEndpoints"][0].update(targetPortt="metrics"),
    "not a duration": lambda d: d["spec"]["podMetricsEndpoints"][0].update(interval="15 seconds"),
    "another apiVersion": lambda d: d.update(apiVersion="monitoring.coreos.com/v1beta1"),
    "no selector": lambda d: d["spec"].pop("selector"),
}


@pytest.mark.parametrize("breakage", sorted(BROKEN_PODMONITOR))
def test_the_podmonitor_check_rejects_a_broken_one(breakage: str) -> None:
    broken = copy.deepcopy(podmonitor())
    BROKEN_PODMONITOR[breakage](broken)
    with pytest.raises(jsonschema.ValidationError):
        podmonitor_validator().validate(broken)


def test_the_podmonitor_scrapes_the_workers_metrics_port() -> None:
    monitor = podmonitor()
    assert monitor["metadata"]["namespace"] == k8s.NAMESPACE
    workers = k8s.one("Deployment", "graphrunner-worker")
    assert k8s.selects(monitor["spec"]["selector"], k8s.pod_labels(workers))
    others = [w for w in k8s.workloads() if w is not workers]
    assert not [w for w in others if k8s.selects(monitor["spec"]["selector"], k8s.pod_labels(w))]
    (endpoint,) = monitor["spec"]["podMetricsEndpoints"]
    ports = {p["name"]: p["containerPort"] for p in worker()["ports"]}
    assert ports[endpoint["port"]] == METRICS_PORT


def test_the_podmonitor_and_dashboard_are_a_component_outside_the_base() -> None:
    """The base applies without the Prometheus Operator's CRDs; the component adds both."""
    base = k8s.kustomization()
    assert "components" not in base and not [r for r in base["resources"] if "observability" in r]
    assert "#   - observability" in (k8s.DEPLOY / "kustomization.yaml").read_text()
    component = load_yaml(COMPONENT)
    assert (component["apiVersion"], component["kind"]) == ("kustomize.config.k8s.io/v1alpha1", "Component")
    assert component["resources"] == [PODMONITOR.name]
    (generator,) = component["configMapGenerator"]
    assert generator["files"] == [str(DASHBOARD.relative_to(OBS))]
    assert generator["options"]["labels"]["grafana_dashboard"] == "1"
    assert generator["namespace"] == k8s.NAMESPACE


def test_the_dashboard_config_map_is_valid_kubernetes() -> None:
    """The ConfigMap the component generates, built here as kustomize builds it."""
    (generator,) = load_yaml(COMPONENT)["configMapGenerator"]
    config_map = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": generator["name"],
            "namespace": generator["namespace"],
            "labels": generator["options"]["labels"],
        },
        "data": {Path(f).name: (OBS / f).read_text() for f in generator["files"]},
    }
    k8s.validate_kubernetes(config_map)
    assert (
        len(DASHBOARD.read_bytes()) < 900_000
    )  # a ConfigMap holds 1 MiB; leave room for the apply annotation


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
def test_kubectl_kustomize_builds_the_base_with_the_component(tmp_path: Path) -> None:
    (tmp_path / "deploy").symlink_to(k8s.DEPLOY)
    overlay = tmp_path / "overlay"
    overlay.mkdir()
    (overlay / "kustomization.yaml").write_text(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
        "resources: [../deploy]\ncomponents: [../deploy/observability]\n"
    )
    out = subprocess.run(
        ["kubectl", "kustomize", str(overlay)], capture_output=True, text=True, timeout=60, check=True
    ).stdout
    rendered = {(d["kind"], d["metadata"]["name"]): d for d in yaml.safe_load_all(out) if d}
    listed = {
        (d["kind"], d["metadata"]["name"])
        for r in k8s.kustomization()["resources"]
        for d in k8s.load(k8s.DEPLOY / r)
    }
    assert set(rendered) == listed | {
        ("PodMonitor", "graphrunner-worker"),
        ("ConfigMap", "graphrunner-grafana-dashboard"),
    }
    config_map = rendered[("ConfigMap", "graphrunner-grafana-dashboard")]
    assert config_map["metadata"]["namespace"] == k8s.NAMESPACE
    assert config_map["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(config_map["data"][DASHBOARD.name]) == dashboard()
    k8s.validate_kubernetes(config_map)
    podmonitor_validator().validate(rendered[("PodMonitor", "graphrunner-worker")])


def test_the_config_map_has_the_otel_settings_and_exports_nothing_by_default() -> None:
    config = k8s.config()
    assert config["OTEL_TRACES_EXPORTER"] == "none"
    assert config["OTEL_METRICS_EXPORTER"] == "none"
    assert config["OTEL_SERVICE_NAME"] == "graphrunner"
    assert config["OTEL_EXPORTER_OTLP_PROTOCOL"] == "http/protobuf"
    endpoint = urlsplit(config["OTEL_EXPORTER_OTLP_ENDPOINT"])
    assert endpoint.scheme == "http" and endpoint.port == 4318 and endpoint.hostname
    assert config["OTEL_TRACES_SAMPLER"] == "parentbased_traceidratio"
    assert 0 < float(config["OTEL_TRACES_SAMPLER_ARG"]) <= 1
    text = (k8s.DEPLOY / "configmap.yaml").read_text()
    assert "OTEL_TRACES_EXPORTER: none  # `otlp` to send traces" in text  # how to turn it on


@pytest.mark.parametrize("name", sorted(TELEMETRY_SERVICES))
def test_each_graphrunner_process_names_its_service_and_its_pod(name: str) -> None:
    deployment = k8s.one("Deployment", TELEMETRY_SERVICES[name])
    (container,) = k8s.containers(deployment)
    env = container["env"]
    values = {v["name"]: v.get("value") for v in env}
    assert values["OTEL_SERVICE_NAME"] == TELEMETRY_SERVICES[name]
    fields = {
        v["name"]: v["valueFrom"]["fieldRef"]["fieldPath"]
        for v in env
        if "fieldRef" in v.get("valueFrom", {})
    }
    attributes = dict(pair.split("=", 1) for pair in values["OTEL_RESOURCE_ATTRIBUTES"].split(","))
    assert attributes["k8s.pod.name"] == "$(K8S_POD_NAME)" and fields["K8S_POD_NAME"] == "metadata.name"
    order = [v["name"] for v in env]
    for reference in re.findall(r"\$\((\w+)\)", values["OTEL_RESOURCE_ATTRIBUTES"]):
        assert reference in fields and order.index(reference) < order.index("OTEL_RESOURCE_ATTRIBUTES")
    if name == "worker":  # scraped from its metrics port, never sent over OTLP as well
        assert values["OTEL_METRICS_EXPORTER"] == "none"
    else:
        assert "OTEL_METRICS_EXPORTER" not in values  # the ConfigMap's


def test_only_prometheus_reaches_the_workers_metrics_port() -> None:
    workers = k8s.pod_labels(k8s.one("Deployment", "graphrunner-worker"))
    prometheus = {"app.kubernetes.io/name": "prometheus"}
    assert k8s.admitted(workers, METRICS_PORT, prometheus, "monitoring")
    assert not k8s.admitted(workers, METRICS_PORT, prometheus, "default")
    assert not k8s.admitted(workers, METRICS_PORT, {"app": "other"}, "monitoring")
    assert not k8s.admitted(
        workers, METRICS_PORT, k8s.pod_labels(k8s.one("Deployment", "graphrunner-ui")), k8s.NAMESPACE
    )
    assert not k8s.admitted(workers, 8808, prometheus, "monitoring")  # the metrics port only
    beat = k8s.pod_labels(k8s.one("Deployment", "graphrunner-beat"))
    assert not k8s.admitted(beat, METRICS_PORT, prometheus, "monitoring")  # beat listens on nothing


def egress_example() -> Doc:
    """The commented policy of networkpolicy.yaml that admits the collector when egress is restricted."""
    text = (k8s.DEPLOY / "networkpolicy.yaml").read_text()
    block = text.split("# BEGIN egress-otel-collector\n")[1].split("# END egress-otel-collector")[0]
    (doc,) = [d for d in yaml.safe_load_all("\n".join(line[2:] for line in block.splitlines())) if d]
    return doc  # type: ignore[no-any-return]


def test_the_pods_reach_the_collector_even_where_egress_is_restricted() -> None:
    restricting = [p for p in k8s.policies() if "Egress" in p["spec"]["policyTypes"]]
    for policy in restricting:  # none shipped; one added later must admit OTLP
        ports = {p["port"] for rule in policy["spec"].get("egress", []) for p in rule.get("ports", [])}
        assert {4317, 4318} <= ports, policy["metadata"]["name"]
    example = egress_example()
    k8s.validate_kubernetes(example)
    assert example["spec"]["policyTypes"] == ["Egress"]
    assert k8s.selects(
        example["spec"]["podSelector"], k8s.pod_labels(k8s.one("Deployment", "graphrunner-worker"))
    )
    (rule,) = example["spec"]["egress"]
    assert {p["port"] for p in rule["ports"]} == {4317, 4318}
    (peer,) = rule["to"]
    namespace = peer["namespaceSelector"]["matchLabels"]["kubernetes.io/metadata.name"]
    assert urlsplit(k8s.config()["OTEL_EXPORTER_OTLP_ENDPOINT"]).hostname == f"otel-collector.{namespace}.svc"


# -- docs ---------------------------------------------------------------------------------------


def test_the_docs_give_the_command_and_the_addresses() -> None:
    command = (
        "docker compose -f docker-compose.yml -f docker-compose.observability.yml "
        "--profile observability up -d --build --scale worker=3"
    )
    deploy_md = (ROOT / "docs" / "deploy.md").read_text()
    assert "## Observability" in deploy_md
    for text in (deploy_md, COMPOSE.read_text(), COMPOSE_OBSERVABILITY.read_text()):
        assert command in text
    for address in ("http://localhost:16686", "http://localhost:3000", "http://localhost:9090"):
        assert address in deploy_md
    readme = (k8s.DEPLOY / "README.md").read_text()
    assert "observability/" in readme and "podmonitor.yaml" in readme
