"""The Kubernetes deployment in deploy/: every object valid, the files consistent with each other.

Core objects are checked against Kubernetes' own schemas (kubernetes-validate, strict: an unknown
field is an error), KEDA's objects against keda_scaledobject.schema.json, and the commands the
manifests run against graphrunner's CLI. No cluster and no network: only files and `--help`.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import jsonschema
import kubernetes_validate
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
KEDA_SCHEMA = Path(__file__).with_name("keda_scaledobject.schema.json")
KUBERNETES_VERSION = "1.37.0"  # the newest version kubernetes-validate 1.37 ships schemas for
NAMESPACE = "graphrunner"
# examples, and the alternative to KEDA
NOT_APPLIED = {"secret.example.yaml", "hpa-cpu.yaml", "ui-users.example.yaml"}
KEDA_API = "keda.sh/v1alpha1"
KUSTOMIZE_API = "kustomize.config.k8s.io/v1beta1"
WORKLOADS = {"Deployment", "StatefulSet"}
PLACEHOLDER = "change-me"

Doc = dict[str, Any]


def load(path: Path) -> list[Doc]:
    """The YAML documents of one file (empty documents left out)."""
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]


MANIFESTS = sorted(DEPLOY.glob("*.yaml"))
DOCS: list[tuple[str, Doc]] = [(path.name, doc) for path in MANIFESTS for doc in load(path)]


def label(item: tuple[str, Doc]) -> str:
    file, doc = item
    return f"{file}:{doc['kind']}/{doc.get('metadata', {}).get('name', '')}"


def is_keda(doc: Doc) -> bool:
    return bool(doc["apiVersion"] == KEDA_API)


def is_kustomization(doc: Doc) -> bool:
    return bool(doc["apiVersion"] == KUSTOMIZE_API)


CORE = [item for item in DOCS if not is_keda(item[1]) and not is_kustomization(item[1])]
KEDA = [item for item in DOCS if is_keda(item[1])]


def objects(kind: str, *, applied_only: bool = False) -> list[Doc]:
    """Every object of `kind` in deploy/ (or only in the files kustomization.yaml applies)."""
    return [doc for file, doc in DOCS if doc["kind"] == kind and not (applied_only and file in NOT_APPLIED)]


def one(kind: str, name: str) -> Doc:
    """The single object of `kind` named `name`."""
    found = [doc for doc in objects(kind) if doc["metadata"]["name"] == name]
    assert len(found) == 1, f"expected one {kind} {name!r} in deploy/, found {len(found)}"
    return found[0]


def config() -> dict[str, str]:
    data: dict[str, str] = one("ConfigMap", "graphrunner-config")["data"]
    return data


def example_secret() -> Doc:
    return one("Secret", "graphrunner-secrets")


def pod_spec(workload: Doc) -> Doc:
    spec: Doc = workload["spec"]["template"]["spec"]
    return spec


def containers(workload: Doc) -> list[Doc]:
    pod = pod_spec(workload)
    found: list[Doc] = pod["containers"] + pod.get("initContainers", [])
    return found


def pod_labels(workload: Doc) -> dict[str, str]:
    found: dict[str, str] = workload["spec"]["template"]["metadata"]["labels"]
    return found


def workloads() -> list[Doc]:
    return [doc for _, doc in DOCS if doc["kind"] in WORKLOADS]


def container(workload: Doc, name: str) -> Doc:
    found = [c for c in containers(workload) if c["name"] == name]
    assert len(found) == 1, f"{workload['metadata']['name']} has no single container {name!r}"
    return found[0]


def validate_kubernetes(doc: Doc) -> None:
    kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)


def keda_validator() -> jsonschema.Draft202012Validator:
    schema = json.loads(KEDA_SCHEMA.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


# -- every object is valid ---------------------------------------------------------------------


def test_deploy_holds_the_expected_manifests() -> None:
    assert {path.name for path in MANIFESTS} >= {
        "namespace.yaml",
        "configmap.yaml",
        "secret.example.yaml",
        "worker.yaml",
        "beat.yaml",
        "flower.yaml",
        "ui.yaml",
        "keda-scaledobject.yaml",
        "hpa-cpu.yaml",
        "pdb.yaml",
        "redis.yaml",
        "networkpolicy.yaml",
        "ui-users.example.yaml",
        "kustomization.yaml",
    }


@pytest.mark.parametrize("item", CORE, ids=label)
def test_every_core_object_is_valid_kubernetes(item: tuple[str, Doc]) -> None:
    """Kubernetes' own schema for the object's kind and apiVersion; unknown fields are errors."""
    validate_kubernetes(item[1])


BROKEN_CORE: dict[str, Callable[[Doc], None]] = {
    "misspelled field": lambda d: d["spec"].update(replica=d["spec"].pop("replicas")),
    "string for an integer": lambda d: pod_spec(d).update(terminationGracePeriodSeconds="120"),
    "unknown container field": lambda d: d["spec"]["template"]["spec"]["containers"][0].update(argz=[]),
}


@pytest.mark.parametrize("breakage", sorted(BROKEN_CORE))
def test_the_kubernetes_check_rejects_a_broken_object(breakage: str) -> None:
    broken = copy.deepcopy(one("Deployment", "graphrunner-beat"))
    validate_kubernetes(copy.deepcopy(broken))  # the unbroken copy passes
    BROKEN_CORE[breakage](broken)
    with pytest.raises(kubernetes_validate.ValidationError):
        validate_kubernetes(broken)


def test_the_keda_schema_rejects_unknown_fields_at_every_level() -> None:
    """additionalProperties is false on every object the schema describes (if/then overlays aside)."""

    def walk(node: Any, where: str) -> Iterator[str]:
        if isinstance(node, dict):
            described = node.get("type") == "object" and "properties" in node
            if described and node.get("additionalProperties") is not False:
                yield where
            for key, value in node.items():
                yield from walk(value, f"{where}/{key}")
        elif isinstance(node, list):
            for index, value in enumerate(node):
                yield from walk(value, f"{where}/{index}")

    schema = json.loads(KEDA_SCHEMA.read_text())
    assert list(walk(schema, "#")) == []
    assert "https://keda.sh/docs/2.16/scalers/redis-lists/" in schema["description"]
    assert "https://keda.sh/docs/2.16/concepts/scaling-deployments/" in schema["description"]


def test_keda_objects_are_there() -> None:
    assert sorted(doc["kind"] for _, doc in KEDA) == ["ScaledObject", "TriggerAuthentication"]


@pytest.mark.parametrize("item", KEDA, ids=label)
def test_keda_objects_match_the_keda_schema(item: tuple[str, Doc]) -> None:
    keda_validator().validate(item[1])


def redis_trigger(scaled: Doc) -> Doc:
    triggers = [t for t in scaled["spec"]["triggers"] if t["type"] == "redis"]
    assert len(triggers) == 1, "the ScaledObject has no single redis trigger"
    trigger: Doc = triggers[0]
    return trigger


BROKEN_KEDA: dict[str, Callable[[Doc], None]] = {
    "misspelled spec field": lambda d: d["spec"].update(minReplicas=d["spec"].pop("minReplicaCount")),
    "integer for a metadata string": lambda d: redis_trigger(d)["metadata"].update(listLength=20),
    "no listName": lambda d: redis_trigger(d)["metadata"].pop("listName"),
    "unknown redis metadata key": lambda d: redis_trigger(d)["metadata"].update(queueName="graphrunner"),
    "KEDA v1 scaleTargetRef": lambda d: d["spec"]["scaleTargetRef"].update(
        deploymentName="graphrunner-worker"
    ),
    "string for an integer": lambda d: d["spec"].update(pollingInterval="15"),
}


@pytest.mark.parametrize("breakage", sorted(BROKEN_KEDA))
def test_the_keda_check_rejects_a_broken_scaled_object(breakage: str) -> None:
    validator = keda_validator()
    broken = copy.deepcopy(one("ScaledObject", "graphrunner-worker"))
    validator.validate(broken)
    BROKEN_KEDA[breakage](broken)
    with pytest.raises(jsonschema.ValidationError):
        validator.validate(broken)


def test_the_keda_check_rejects_a_broken_trigger_authentication() -> None:
    broken = copy.deepcopy(one("TriggerAuthentication", "graphrunner-redis"))
    broken["spec"]["secretTargetRef"][0]["secret"] = broken["spec"]["secretTargetRef"][0].pop("name")
    with pytest.raises(jsonschema.ValidationError):
        keda_validator().validate(broken)


@pytest.mark.parametrize(
    "item", [i for i in DOCS if i[1]["kind"] not in ("Namespace", "Kustomization")], ids=label
)
def test_every_object_is_in_the_graphrunner_namespace(item: tuple[str, Doc]) -> None:
    assert item[1]["metadata"].get("namespace") == NAMESPACE


# -- kustomization -----------------------------------------------------------------------------


def kustomization() -> Doc:
    docs = load(DEPLOY / "kustomization.yaml")
    assert len(docs) == 1 and docs[0]["kind"] == "Kustomization"
    return docs[0]


def test_kustomization_names_only_files_that_exist() -> None:
    resources = kustomization()["resources"]
    assert len(resources) == len(set(resources))
    assert [r for r in resources if not (DEPLOY / r).is_file()] == []


def test_kustomization_lists_every_manifest_but_the_example_and_the_alternative() -> None:
    resources = set(kustomization()["resources"])
    expected = {p.name for p in MANIFESTS} - NOT_APPLIED - {"kustomization.yaml"}
    assert resources == expected
    assert kustomization()["namespace"] == NAMESPACE


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
def test_kubectl_kustomize_builds_the_listed_objects() -> None:
    """kustomize renders offline (no cluster); every object of the listed files comes out."""
    out = subprocess.run(
        ["kubectl", "kustomize", str(DEPLOY)], capture_output=True, text=True, timeout=60, check=True
    ).stdout
    rendered = sorted((d["kind"], d["metadata"]["name"]) for d in yaml.safe_load_all(out) if d)
    listed = sorted(
        (d["kind"], d["metadata"]["name"]) for r in kustomization()["resources"] for d in load(DEPLOY / r)
    )
    assert rendered == listed


# -- the files agree with each other ------------------------------------------------------------


def test_the_scaled_object_scales_the_worker_deployment() -> None:
    target = one("ScaledObject", "graphrunner-worker")["spec"]["scaleTargetRef"]
    assert target.get("apiVersion", "apps/v1") == "apps/v1"
    assert target.get("kind", "Deployment") == "Deployment"
    one("Deployment", target["name"])
    hpa = one("HorizontalPodAutoscaler", "graphrunner-worker")["spec"]["scaleTargetRef"]
    assert (hpa["kind"], hpa["name"]) == ("Deployment", target["name"])


def test_keda_watches_the_queue_the_workers_consume() -> None:
    assert (
        redis_trigger(one("ScaledObject", "graphrunner-worker"))["metadata"]["listName"]
        == config()["GRAPHRUNNER_QUEUE"]
    )


def test_keda_reads_the_redis_and_database_the_cluster_uses() -> None:
    trigger = redis_trigger(one("ScaledObject", "graphrunner-worker"))
    host, port = trigger["metadata"]["address"].rsplit(":", 1)
    service_name, namespace = host.split(".")[:2]
    service = one("Service", service_name)
    assert namespace == service["metadata"]["namespace"] == NAMESPACE
    assert int(port) in [p["port"] for p in service["spec"]["ports"]]
    url = urlsplit(example_secret()["stringData"]["GRAPHRUNNER_REDIS_URL"])
    assert (url.hostname, url.port) == (service_name, int(port))
    assert trigger["metadata"].get("databaseIndex", "0") == (url.path.strip("/") or "0")


def test_keda_authenticates_with_the_redis_password() -> None:
    trigger = redis_trigger(one("ScaledObject", "graphrunner-worker"))
    auth = one(
        trigger["authenticationRef"].get("kind", "TriggerAuthentication"),
        trigger["authenticationRef"]["name"],
    )
    refs = {r["parameter"]: r for r in auth["spec"]["secretTargetRef"]}
    assert (refs["password"]["name"], refs["password"]["key"]) == ("graphrunner-secrets", "REDIS_PASSWORD")
    assert "REDIS_PASSWORD" in example_secret()["stringData"]
    redis = container(one("StatefulSet", "redis"), "redis")
    assert "requirepass $REDIS_PASSWORD\n" in redis["command"][-1]  # on redis-server's stdin
    env = {v["name"]: v["valueFrom"]["secretKeyRef"] for v in redis["env"]}
    assert (
        env["REDIS_PASSWORD"]
        == env["REDISCLI_AUTH"]
        == {"name": "graphrunner-secrets", "key": "REDIS_PASSWORD"}
    )
    url = urlsplit(example_secret()["stringData"]["GRAPHRUNNER_REDIS_URL"])
    assert url.password == example_secret()["stringData"]["REDIS_PASSWORD"]


def test_the_worker_grace_period_is_the_configured_stop_grace() -> None:
    worker = one("Deployment", "graphrunner-worker")
    assert pod_spec(worker)["terminationGracePeriodSeconds"] == int(config()["GRAPHRUNNER_STOP_GRACE"])


def test_workers_roll_out_without_losing_capacity_and_have_only_their_metrics_port() -> None:
    worker = one("Deployment", "graphrunner-worker")
    assert worker["spec"]["strategy"] == {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1},
    }
    assert "replicas" not in worker["spec"], "the autoscaler owns the worker count"
    ports = [p for c in containers(worker) for p in c.get("ports", [])]
    assert ports == [{"name": "metrics", "containerPort": 9464}]  # test_observability_deploy.py


def test_worker_readiness_outwaits_the_ping_timeout() -> None:
    probe = container(one("Deployment", "graphrunner-worker"), "worker")["readinessProbe"]
    command = probe["exec"]["command"]
    assert command[:3] == ["graphrunner", "ping", "--local"]
    ping_timeout = float(command[command.index("--timeout") + 1])
    assert probe["timeoutSeconds"] > ping_timeout


def test_worker_liveness_needs_no_network_and_a_writable_tmp() -> None:
    """`graphrunner alive` reads the file the worker touches: under /tmp, a volume of its own on a
    read-only root filesystem, where GRAPHRUNNER_LIVENESS_FILE (its default) puts it."""
    from graphrunner.settings import LIVENESS_FILE

    worker = container(one("Deployment", "graphrunner-worker"), "worker")
    command = worker["livenessProbe"]["exec"]["command"]
    assert command[:2] == ["graphrunner", "alive"]
    assert float(command[command.index("--max-age") + 1]) >= worker["livenessProbe"]["periodSeconds"]
    assert worker["securityContext"]["readOnlyRootFilesystem"] is True
    mounts = [m["mountPath"] for m in worker["volumeMounts"]]
    assert any(LIVENESS_FILE.is_relative_to(m) for m in mounts), mounts


def test_the_worker_keeps_the_name_ping_local_asks_for() -> None:
    """`ping --local` asks celery@HOSTNAME: the worker must not be renamed with -n/--hostname."""
    args = container(one("Deployment", "graphrunner-worker"), "worker")["args"]
    assert not [a for a in args if a in ("-n", "--hostname") or a.startswith(("-n", "--hostname="))]


def test_one_beat_never_two() -> None:
    beat = one("Deployment", "graphrunner-beat")
    assert beat["spec"]["replicas"] == 1
    assert beat["spec"]["strategy"] == {"type": "Recreate"}


@pytest.mark.parametrize("workload", workloads(), ids=lambda w: w["metadata"]["name"])
def test_every_pod_runs_as_non_root_without_privilege_escalation(workload: Doc) -> None:
    pod_context = pod_spec(workload).get("securityContext", {})
    for c in containers(workload):
        context = c.get("securityContext", {})
        assert context.get("runAsNonRoot", pod_context.get("runAsNonRoot")) is True, c["name"]
        assert context.get("allowPrivilegeEscalation") is False, c["name"]
        assert context.get("privileged", False) is False, c["name"]


@pytest.mark.parametrize("workload", workloads(), ids=lambda w: w["metadata"]["name"])
def test_every_selector_matches_its_pods(workload: Doc) -> None:
    selector = workload["spec"]["selector"]["matchLabels"]
    assert selector.items() <= pod_labels(workload).items()


def referenced(workload: Doc) -> Iterator[tuple[str, str, str | None]]:
    """(kind, name, key or None) of every ConfigMap and Secret a workload's containers read."""
    for c in containers(workload):
        for source in c.get("envFrom", []):
            if "configMapRef" in source:
                yield "ConfigMap", source["configMapRef"]["name"], None
            if "secretRef" in source:
                yield "Secret", source["secretRef"]["name"], None
        for var in c.get("env", []):
            ref = var.get("valueFrom", {})
            if "configMapKeyRef" in ref:
                yield "ConfigMap", ref["configMapKeyRef"]["name"], ref["configMapKeyRef"]["key"]
            if "secretKeyRef" in ref:
                yield "Secret", ref["secretKeyRef"]["name"], ref["secretKeyRef"]["key"]


@pytest.mark.parametrize("workload", workloads(), ids=lambda w: w["metadata"]["name"])
def test_every_config_map_and_secret_referenced_exists(workload: Doc) -> None:
    for kind, name, key in referenced(workload):
        source = one(kind, name)
        if key is not None:
            assert key in source.get("data", {}) | source.get("stringData", {}), f"{kind} {name} has no {key}"


def test_keda_reads_a_secret_that_exists() -> None:
    for ref in one("TriggerAuthentication", "graphrunner-redis")["spec"]["secretTargetRef"]:
        assert ref["key"] in one("Secret", ref["name"])["stringData"]


# (Deployment and Service, container, the variable holding its login, its port)
WEB_UIS = [
    ("graphrunner-flower", "flower", "FLOWER_BASIC_AUTH", 5555),
    ("graphrunner-ui", "ui", "GRAPHRUNNER_UI_BASIC_AUTH", 8808),
]


@pytest.mark.parametrize(("name", "container_name", "variable", "port"), WEB_UIS, ids=lambda v: str(v))
def test_the_web_uis_get_their_login_from_the_secret(
    name: str, container_name: str, variable: str, port: int
) -> None:
    web = container(one("Deployment", name), container_name)
    from_env = [
        v["valueFrom"]["secretKeyRef"]
        for v in web.get("env", [])
        if v["name"] == variable and "secretKeyRef" in v.get("valueFrom", {})
    ]
    from_env_from = [s["secretRef"]["name"] for s in web.get("envFrom", []) if "secretRef" in s]
    assert from_env or from_env_from
    for ref in from_env:
        assert ref["key"] == variable
        assert ref["key"] in one("Secret", ref["name"])["stringData"]
    for secret_name in from_env_from:
        assert variable in one("Secret", secret_name)["stringData"]
    assert [v for v in web.get("env", []) if v["name"] == variable and "value" in v] == []
    assert not [a for a in web["args"] if a.startswith(("--basic-auth", "--no-auth"))]


@pytest.mark.parametrize(("name", "container_name", "variable", "port"), WEB_UIS, ids=lambda v: str(v))
def test_the_web_uis_probe_their_unauthenticated_health_endpoint_on_their_port(
    name: str, container_name: str, variable: str, port: int
) -> None:
    deployment = one("Deployment", name)
    web = container(deployment, container_name)
    assert f"--port={port}" in web["args"] and "--address=0.0.0.0" in web["args"]
    assert [p["containerPort"] for p in web["ports"]] == [port]
    for probe_name in ("livenessProbe", "readinessProbe"):
        assert web[probe_name]["httpGet"] == {"path": "/healthcheck", "port": port}
    assert deployment["spec"]["replicas"] == 1
    assert web["resources"]["requests"] and web["resources"]["limits"]
    service = one("Service", name)
    assert service["spec"]["type"] == "ClusterIP"
    assert [p["port"] for p in service["spec"]["ports"]] == [port]
    assert service["spec"]["selector"].items() <= pod_labels(deployment).items()
    assert [p["targetPort"] for p in service["spec"]["ports"]] == [p["name"] for p in web["ports"]]


def test_the_run_explorer_runs_like_flower() -> None:
    """ui.yaml is flower.yaml for another command: the same pod and container security."""
    flower, ui = one("Deployment", "graphrunner-flower"), one("Deployment", "graphrunner-ui")
    assert pod_spec(ui)["securityContext"] == pod_spec(flower)["securityContext"]
    assert pod_spec(ui)["automountServiceAccountToken"] is False
    flower_c, ui_c = container(flower, "flower"), container(ui, "ui")
    assert ui_c["securityContext"] == flower_c["securityContext"]
    assert ui_c["envFrom"] == flower_c["envFrom"]
    assert ui_c["args"][:2] == ["graphrunner", "ui"]


@pytest.mark.parametrize("service", objects("Service"), ids=lambda s: s["metadata"]["name"])
def test_every_service_selects_pods_that_exist(service: Doc) -> None:
    selector = service["spec"]["selector"].items()
    assert [w for w in workloads() if selector <= pod_labels(w).items()]


def test_the_disruption_budget_covers_the_workers() -> None:
    budget = one("PodDisruptionBudget", "graphrunner-worker")["spec"]
    assert budget["maxUnavailable"] == 1
    assert (
        budget["selector"]["matchLabels"].items()
        <= pod_labels(one("Deployment", "graphrunner-worker")).items()
    )
    others = [w for w in workloads() if w["metadata"]["name"] != "graphrunner-worker"]
    assert not [w for w in others if budget["selector"]["matchLabels"].items() <= pod_labels(w).items()]


def redis_options() -> dict[str, str]:
    """The redis-server options of redis.yaml's start script (the compose service's, same shape)."""
    from compose_files import redis_server_options

    redis = container(one("StatefulSet", "redis"), "redis")
    assert redis["command"][:2] == ["/bin/sh", "-ec"] and "args" not in redis
    return redis_server_options(redis["command"][2])


def test_redis_never_evicts_and_keeps_an_append_only_file() -> None:
    options = redis_options()
    assert options.get("--maxmemory-policy") == "noeviction"
    assert options.get("--appendonly") == "yes"
    assert options.get("--appendfsync") == "everysec"
    assert "--requirepass" not in options


def test_redis_starts_as_the_compose_service_does() -> None:
    """One start script: the same placeholder refusal and stdin configuration (the compose one
    runs as a process in test_compose_processes.py), with Kubernetes' `$` instead of compose's `$$`."""
    from compose_files import argv_of_service, deployed_env, load_compose

    composed = argv_of_service(load_compose(deployed_env())["services"]["redis"])[-1]
    script = container(one("StatefulSet", "redis"), "redis")["command"][-1]

    def body(text: str) -> list[str]:
        return [
            line.strip()
            for line in text.splitlines()
            if line.strip() and not line.strip().startswith(("echo ", "exec redis-server"))
        ]

    assert body(script) == body(composed)


def test_no_container_has_the_redis_password_in_its_argv() -> None:
    for workload in workloads():
        for c in containers(workload):
            lines = [c.get("command", []) + c.get("args", [])]
            lines += [
                c[p]["exec"]["command"] for p in ("livenessProbe", "readinessProbe") if "exec" in c.get(p, {})
            ]
            for argv in lines:
                words = [w for a in argv for w in a.split()]
                assert "--requirepass" not in words and "-a" not in words, c["name"]
                assert not [a for a in argv if "$(REDIS_PASSWORD)" in a], c["name"]  # Kubernetes' expansion


# -- secure by default --------------------------------------------------------------------------


@pytest.mark.parametrize("workload", workloads(), ids=lambda w: w["metadata"]["name"])
def test_every_container_is_locked_down(workload: Doc) -> None:
    pod = pod_spec(workload)
    pod_context = pod["securityContext"]
    assert pod_context["seccompProfile"] == {"type": "RuntimeDefault"}
    assert pod_context["runAsUser"] > 0 and pod_context["runAsGroup"] > 0
    assert pod["automountServiceAccountToken"] is False
    assert not pod.get("hostNetwork") and not pod.get("hostPID") and not pod.get("hostIPC")
    for c in containers(workload):
        context = c["securityContext"]
        assert context["readOnlyRootFilesystem"] is True, c["name"]
        assert context["capabilities"] == {"drop": ["ALL"]}, c["name"]
        assert context["allowPrivilegeEscalation"] is False, c["name"]
        writable = {m["mountPath"] for m in c.get("volumeMounts", []) if not m.get("readOnly")}
        assert writable <= {"/tmp", "/data"}, c["name"]


@pytest.mark.parametrize("workload", workloads(), ids=lambda w: w["metadata"]["name"])
def test_every_container_has_requests_and_limits(workload: Doc) -> None:
    for c in containers(workload):
        resources = c["resources"]
        assert {"cpu", "memory"} <= resources["requests"].keys(), c["name"]
        assert {"cpu", "memory"} <= resources["limits"].keys(), c["name"]


def test_every_image_is_pinned_to_an_exact_release() -> None:
    import re

    images = {c["image"] for w in workloads() for c in containers(w)}
    assert images == {"graphrunner-worker:0.1.0", "redis:7.4.11-alpine"}
    from compose_files import OBSERVABILITY, load_compose

    composed = {s["image"] for name, s in load_compose()["services"].items() if name not in OBSERVABILITY}
    assert composed == images  # compose and Kubernetes run the same releases
    for image in images:
        assert re.fullmatch(r"[a-z0-9./-]+:\d+\.\d+\.\d+(-[a-z0-9.]+)?(@sha256:[0-9a-f]{64})?", image), image


def test_the_default_capabilities_are_never_everything() -> None:
    patterns = [p.strip() for p in config()["GRAPHRUNNER_DEFAULT_CAPABILITIES"].split(",")]
    assert {"tool:echo", "tool:fail", "tool:sleep"} <= set(patterns)
    assert not [p for p in patterns if "*" in p]


def test_the_example_users_file_is_one_the_explorer_accepts(tmp_path: Path) -> None:
    """ui-users.example.yaml's users file loads, with its password file where ui.yaml mounts it."""
    from graphrunner.ui.logins import load_users

    users_map = one("ConfigMap", "graphrunner-ui-users")["data"]
    text = users_map["ui-users.yaml"]
    mounted = "/run/secrets/graphrunner-ui/"
    assert mounted in text and "*" not in text
    ui = (DEPLOY / "ui.yaml").read_text()
    assert f"mountPath: {mounted.rstrip('/')}" in ui and "mountPath: /etc/graphrunner" in ui
    assert "value: /etc/graphrunner/ui-users.yaml" in ui and "ui-users.yaml" in users_map
    (tmp_path / "ops").write_text("a-real-password-0123")
    path = tmp_path / "ui-users.yaml"
    path.write_text(text.replace(mounted, f"{tmp_path}/"))
    logins = load_users(path, environ={})
    assert set(logins) == {"ops"}
    assert "tool:shell" in logins["ops"].granted and "tool:echo" in logins["ops"].granted


# -- network policies ---------------------------------------------------------------------------


def policies() -> list[Doc]:
    return objects("NetworkPolicy", applied_only=True)


def selects(selector: Doc, labels: dict[str, str]) -> bool:
    """A Kubernetes label selector (matchLabels, matchExpressions In/NotIn/Exists) against labels."""
    if not selector.get("matchLabels", {}).items() <= labels.items():
        return False
    for rule in selector.get("matchExpressions", []):
        key, op, values = rule["key"], rule["operator"], rule.get("values", [])
        ok = {
            "In": labels.get(key) in values,
            "NotIn": labels.get(key) not in values,
            "Exists": key in labels,
            "DoesNotExist": key not in labels,
        }[op]
        if not ok:
            return False
    return True


def admitted(pod: dict[str, str], port: int, source: dict[str, str], namespace: str) -> bool:
    """Whether the applied policies let a pod labelled `source` in `namespace` connect to `pod`
    (in the graphrunner namespace) on `port`: isolated pods accept only what some rule admits."""
    namespace_labels = {"kubernetes.io/metadata.name": namespace}
    applying = [p for p in policies() if selects(p["spec"]["podSelector"], pod)]
    if not [p for p in applying if "Ingress" in p["spec"]["policyTypes"]]:
        return True
    for policy in applying:
        for rule in policy["spec"].get("ingress", []):
            if rule.get("ports") and port not in [p["port"] for p in rule["ports"]]:
                continue
            if "from" not in rule:  # no peers listed: every source
                return True
            for peer in rule["from"]:
                assert "ipBlock" not in peer
                in_namespace = (
                    selects(peer["namespaceSelector"], namespace_labels)
                    if "namespaceSelector" in peer
                    else namespace == NAMESPACE
                )
                if in_namespace and selects(peer.get("podSelector", {}), source):
                    return True
    return False


def test_the_namespace_enforces_the_restricted_pod_security_standard() -> None:
    labels = one("Namespace", NAMESPACE)["metadata"]["labels"]
    assert labels["pod-security.kubernetes.io/enforce"] == "restricted"


def test_the_network_policies_are_applied_and_deny_ingress_by_default() -> None:
    assert "networkpolicy.yaml" in kustomization()["resources"]
    deny = one("NetworkPolicy", "default-deny-ingress")["spec"]
    assert deny == {"podSelector": {}, "policyTypes": ["Ingress"]}
    for workload in workloads():  # every pod is isolated
        assert [p for p in policies() if selects(p["spec"]["podSelector"], pod_labels(workload))]


GRAPHRUNNER_PODS = ["graphrunner-worker", "graphrunner-beat", "graphrunner-flower", "graphrunner-ui"]


def test_only_graphrunner_pods_and_keda_reach_redis_on_6379() -> None:
    redis = pod_labels(one("StatefulSet", "redis"))
    policy = one("NetworkPolicy", "redis")
    assert selects(policy["spec"]["podSelector"], redis)
    for name in GRAPHRUNNER_PODS:
        labels = pod_labels(one("Deployment", name))
        assert admitted(redis, 6379, labels, NAMESPACE), name
        assert not admitted(redis, 6380, labels, NAMESPACE), name
        assert not admitted(redis, 6379, labels, "elsewhere"), name  # the same labels, another namespace
    producer = {"app.kubernetes.io/name": "graphrunner", "app.kubernetes.io/component": "producer"}
    assert admitted(redis, 6379, producer, NAMESPACE)
    assert admitted(redis, 6379, {"app.kubernetes.io/name": "keda-operator"}, "keda")
    assert not admitted(redis, 6379, {"app.kubernetes.io/name": "keda-operator"}, NAMESPACE)
    assert not admitted(redis, 6379, {"app": "something-else"}, NAMESPACE)
    assert not admitted(redis, 6379, {}, "ingress-nginx")


def test_flower_and_the_explorer_admit_only_the_ingress_controller() -> None:
    controller = "ingress-nginx"
    for name, port in (("graphrunner-flower", 5555), ("graphrunner-ui", 8808)):
        labels = pod_labels(one("Deployment", name))
        assert admitted(labels, port, {}, controller), name
        assert not admitted(labels, port, pod_labels(one("Deployment", "graphrunner-worker")), NAMESPACE), (
            name
        )
        assert not admitted(labels, port, {}, "default"), name
    for name in ("graphrunner-worker", "graphrunner-beat"):  # they listen on nothing
        assert not admitted(pod_labels(one("Deployment", name)), 8808, {}, controller), name


def test_no_secret_but_the_example_and_it_holds_only_placeholders() -> None:
    secrets = [(file, doc) for file, doc in DOCS if doc["kind"] == "Secret"]
    assert [file for file, _ in secrets] == ["secret.example.yaml"]
    secret = example_secret()
    assert "data" not in secret, "base64 `data` could hide a real value: use stringData placeholders"
    for key, value in secret["stringData"].items():
        assert PLACEHOLDER in value, f"{key} is not a placeholder"
        assert value.replace(PLACEHOLDER, "") in ("", "ops:", "redis://:@redis:6379/0"), key


def test_the_graphrunner_containers_run_one_image() -> None:
    images = {c["image"] for w in workloads() for c in containers(w) if c["name"] != "redis"}
    assert images == {"graphrunner-worker:0.1.0"}


def test_the_pods_run_as_the_image_user_and_the_args_replace_its_command() -> None:
    """workers/Dockerfile: USER is the pods' runAsUser; no ENTRYPOINT, so `args` is the whole command."""
    from dockerfile_parse import DockerfileParser

    instructions = DockerfileParser(path=str(ROOT / "workers" / "Dockerfile")).structure
    users = [i["value"] for i in instructions if i["instruction"] == "USER"]
    uid, gid = (int(n) for n in users[-1].split(":"))
    assert [i for i in instructions if i["instruction"] == "ENTRYPOINT"] == []
    for workload in workloads():
        if {c["image"] for c in containers(workload)} == {"graphrunner-worker:0.1.0"}:
            context = pod_spec(workload)["securityContext"]
            assert (context["runAsUser"], context["runAsGroup"]) == (uid, gid)
            assert all(c["args"][0] == "graphrunner" for c in containers(workload))


def test_the_readme_describes_every_manifest() -> None:
    readme = (DEPLOY / "README.md").read_text()
    assert [p.name for p in MANIFESTS if f"`{p.name}`" not in readme] == []


# -- the commands are real graphrunner commands -------------------------------------------------


def graphrunner_commands() -> list[list[str]]:
    """Every `graphrunner ...` command line in the manifests: container args and exec probes."""
    found = []
    for workload in workloads():
        for c in containers(workload):
            lines = [c.get("command", []) + c.get("args", [])]
            lines += [
                c[p]["exec"]["command"]
                for p in ("livenessProbe", "readinessProbe", "startupProbe")
                if "exec" in c.get(p, {})
            ]
            found += [line for line in lines if line[:1] == ["graphrunner"]]
    return found


SUBCOMMANDS = sorted({line[1] for line in graphrunner_commands()})


def test_the_manifests_run_the_expected_subcommands() -> None:
    assert SUBCOMMANDS == ["alive", "beat", "flower", "ping", "ui", "worker"]


def graphrunner_worker_options() -> set[str]:
    """The options `graphrunner worker --help` names: its own (e.g. --metrics-port) and Celery's."""
    import re

    env = {k: v for k, v in os.environ.items() if not k.startswith(("GRAPHRUNNER_", "FLOWER_", "OTEL_"))}
    done = subprocess.run(
        [sys.executable, "-m", "graphrunner", "worker", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        cwd=ROOT,
        check=True,
    )
    return set(re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", done.stdout))


def known_options(subcommand: str) -> set[str]:
    """The options `graphrunner <subcommand>` takes: its own, or Celery's and Flower's it passes on."""
    from celery.bin.worker import worker as celery_worker
    from flower.options import options as flower_options

    from graphrunner.cli import main

    if subcommand == "worker":  # Celery's options, and graphrunner's own that its --help lists
        return {opt for p in celery_worker.params for opt in p.opts} | graphrunner_worker_options()
    if subcommand == "flower":
        return {f"--{name}" for name in flower_options._options}
    return {opt for p in main.commands[subcommand].params for opt in p.opts}


@pytest.mark.parametrize("subcommand", SUBCOMMANDS)
def test_every_subcommand_the_manifests_run_exists_and_takes_their_options(subcommand: str) -> None:
    """`graphrunner <subcommand> --help` exits 0, and every --option the manifests pass it is known."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GRAPHRUNNER_", "FLOWER_"))}
    done = subprocess.run(
        [sys.executable, "-m", "graphrunner", subcommand, "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    known = known_options(subcommand)
    for line in graphrunner_commands():
        if line[1] == subcommand:
            used = [arg.split("=", 1)[0] for arg in line[2:] if arg.startswith("--")]
            assert [opt for opt in used if opt not in known] == [], line
