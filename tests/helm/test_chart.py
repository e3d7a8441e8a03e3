"""The Helm chart in helm/relevancy-monitor: rendered offline with helm-python-sdk, core manifests validated against
the schemas of every Kubernetes version in support (1.33 and later) with kubernetes-validate, and the chart's
promises checked on every ci/*-values.yaml.

KEDA's ScaledObject and the Prometheus Operator's ServiceMonitor are CRDs that kubernetes-validate has no schema
for, so their fields are checked here by hand."""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import helm_python
import kubernetes_validate
import pytest
import yaml

from consumers.sampling import SamplingPolicy
from monitor.alerts.rules import parse_rules
from monitor.alerts.settings import AlertSettings
from monitor.config import FIELDS, load_settings
from monitor.ui.settings import UI_PREFIX, UiSettings
from schemas.settings import variables

CHART = Path(__file__).resolve().parents[2] / "helm" / "relevancy-monitor"
CI_VALUES = sorted((CHART / "ci").glob("*-values.yaml"))
KUBE_VERSIONS = ("1.33.0", "1.34.0", "1.35.0", "1.36.0", "1.37.0")  # in support in December 2026
RELEASE, NAMESPACE = "rm", "monitoring"
CRDS = {"ScaledObject", "ServiceMonitor", "PrometheusRule"}
POD_KINDS = {"Deployment", "Job"}
# What every install gives: the chart has no default image (the repository is the one you pushed the image to).
IMAGE_REPOSITORY = "registry.example.com/relevancy-monitor"
REQUIRED: dict[str, Any] = {"image": {"repository": IMAGE_REPOSITORY}}

# Env that is not a setting of the monitor, set on purpose: HOME on the writable emptyDir.
NON_SETTING_ENV = {"HOME"}
# Variables that carry secrets: only ever from a secretKeyRef, never a literal value or a ConfigMap key.
SECRET_ENV = {
    "MONITOR_ANTHROPIC_API_KEY",
    "ANTHROPIC_API_KEY",
    "MONITOR_JUDGE_API_KEY",
    "MONITOR_SHADOW_JUDGE_API_KEY",
    "MONITOR_KAFKA_SASL_PASSWORD",
    "MONITOR_CLICKHOUSE_USER",
    "MONITOR_CLICKHOUSE_PASSWORD",
    "ALERTS_SLACK_WEBHOOK_URL",
}


# ---- rendering helpers ---------------------------------------------------------------------------------------


@cache
def _chart() -> helm_python.Chart:
    return helm_python.Chart.load(CHART)


def _values(path: Path) -> dict[str, Any]:
    return yaml.safe_load(path.read_text(encoding="utf-8")) or {}


def with_required(values: dict[str, Any] | None) -> dict[str, Any]:
    """`values` over the values an install must give (`REQUIRED`), merged key by key."""

    def merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
        out = dict(base)
        for key, value in over.items():
            out[key] = merge(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
        return out

    return merge(REQUIRED, values or {})


def render(values: dict[str, Any] | None = None, *, required: bool = True) -> list[dict[str, Any]]:
    """The rendered objects (NOTES.txt left out), as an install of release `rm` would create them; with `required`,
    over the values every install gives (`REQUIRED`)."""
    given = with_required(values) if required else values or {}
    manifests = _chart().render(given, name=RELEASE, namespace=NAMESPACE, is_install=True)
    return [
        doc
        for path, text in sorted(manifests.items())
        if path.endswith((".yaml", ".yml"))
        for doc in yaml.safe_load_all(text)
        if doc
    ]


@cache
def _rendered(name: str) -> tuple[dict[str, Any], ...]:
    values = {} if name == "chart defaults" else _values(CHART / "ci" / name)
    return tuple(render(values))


CASES = ["chart defaults", *(p.name for p in CI_VALUES)]


@pytest.fixture(params=CASES)
def docs(request: pytest.FixtureRequest) -> list[dict[str, Any]]:
    """The objects rendered from the chart defaults and from each ci/*-values.yaml."""
    return list(_rendered(request.param))


def of_kind(docs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    """The objects of one kind."""
    return [d for d in docs if d["kind"] == kind]


def one(docs: list[dict[str, Any]], kind: str, suffix: str = "") -> dict[str, Any]:
    """The single object of a kind whose name ends with `suffix`."""
    found = [d for d in of_kind(docs, kind) if d["metadata"]["name"].endswith(suffix)]
    assert len(found) == 1, f"expected one {kind} named *{suffix}, got {[d['metadata']['name'] for d in found]}"
    return found[0]


def pod_specs(docs: list[dict[str, Any]]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(kind/name, pod spec) of every Deployment and Job."""
    for d in docs:
        if d["kind"] in POD_KINDS:
            yield f"{d['kind']}/{d['metadata']['name']}", d["spec"]["template"]["spec"]


def containers(spec: dict[str, Any]) -> list[dict[str, Any]]:
    """The init and main containers of a pod spec."""
    return [*spec.get("initContainers", []), *spec["containers"]]


def env_names(docs: list[dict[str, Any]]) -> set[str]:
    """Every variable the chart sets: container env entries and the keys of ConfigMaps loaded with envFrom."""
    config_maps = {d["metadata"]["name"]: d.get("data", {}) for d in of_kind(docs, "ConfigMap")}
    names: set[str] = set()
    for _, spec in pod_specs(docs):
        for c in containers(spec):
            names |= {e["name"] for e in c.get("env", [])}
            for source in c.get("envFrom", []):
                names |= set(config_maps[source["configMapRef"]["name"]])
    return names


def settings_of(docs: list[dict[str, Any]], container: str) -> dict[str, str]:
    """The literal env of a container (envFrom ConfigMaps, then env `value` entries)."""
    config_maps = {d["metadata"]["name"]: d.get("data", {}) for d in of_kind(docs, "ConfigMap")}
    for _, spec in pod_specs(docs):
        for c in containers(spec):
            if c["name"] == container:
                env: dict[str, str] = {}
                for source in c.get("envFrom", []):
                    env |= config_maps[source["configMapRef"]["name"]]
                env |= {e["name"]: e["value"] for e in c.get("env", []) if "value" in e}
                return env
    raise AssertionError(f"no container {container}")


def real_settings() -> set[str]:
    """The env names the commands accept: MONITOR_<setting>, ALERTS_<setting>, MONITOR_UI_<setting> (`ui` alone) and
    the unprefixed ones."""
    names = {v for name, field in FIELDS.items() for v in variables("MONITOR_", name, field)}
    names |= {v for name, field in UiSettings.model_fields.items() for v in variables(UI_PREFIX, name, field)}
    return names | {v for name, field in AlertSettings.model_fields.items() for v in variables("ALERTS_", name, field)}


# ---- rendering, lint and schema validation ------------------------------------------------------------------


def test_ci_values_files_exist() -> None:
    """The chart ships the chart-testing values files: defaults, every feature on, and a ClickHouse server with
    secrets."""
    assert {p.name for p in CI_VALUES} >= {
        "default-values.yaml",
        "all-features-values.yaml",
        "server-clickhouse-values.yaml",
    }


def test_renders_core_objects(docs: list[dict[str, Any]]) -> None:
    """Every values file renders the two Deployments, the settings and sampling ConfigMaps, ServiceAccount, Service,
    PDB and migrate Job."""
    kinds = {d["kind"] for d in docs}
    assert {"Deployment", "ConfigMap", "ServiceAccount", "Service", "PodDisruptionBudget", "Job"} <= kinds
    one(docs, "Deployment", "-consumer")
    one(docs, "Deployment", "-alert-evaluator")
    one(docs, "ConfigMap", "-settings")
    one(docs, "ConfigMap", "-sampling")


def test_core_manifests_validate_against_kubernetes_schemas(docs: list[dict[str, Any]]) -> None:
    """Every non-CRD object passes kubernetes-validate in strict mode (no unknown fields) for every Kubernetes version
    in support."""
    for version in KUBE_VERSIONS:
        for d in docs:
            if d["kind"] not in CRDS:
                kubernetes_validate.validate(d, version, strict=True)


@pytest.mark.parametrize("kube", [KUBE_VERSIONS[0], KUBE_VERSIONS[-1]])
@pytest.mark.parametrize("values_file", [None, *CI_VALUES], ids=["chart defaults", *(p.name for p in CI_VALUES)])
def test_lint_strict_is_clean(values_file: Path | None, kube: str) -> None:
    """`helm lint --strict` for the oldest and the newest Kubernetes in support reports no warning or error with the
    defaults and each ci values file."""
    report = helm_python.lint(
        CHART, with_required(_values(values_file) if values_file else None), strict=True, kube_version=f"v{kube}"
    )
    problems = [m for m in report["messages"] if m["severity"] >= 2]
    assert not report["errors"], report["errors"]
    assert not problems, problems


def test_the_chart_claims_the_kubernetes_versions_it_is_tested_on() -> None:
    """The chart's kubeVersion starts at the oldest version validated here (helm refuses an older cluster)."""
    claimed = yaml.safe_load((CHART / "Chart.yaml").read_text(encoding="utf-8"))["kubeVersion"]
    assert claimed == f">={KUBE_VERSIONS[0]}-0"


def test_all_features_file_turns_every_option_on() -> None:
    """ci/all-features-values.yaml renders every optional object: ScaledObject, ServiceMonitor, NetworkPolicy and the
    alert-rules ConfigMap."""
    docs = list(_rendered("all-features-values.yaml"))
    assert {"ScaledObject", "ServiceMonitor", "NetworkPolicy"} <= {d["kind"] for d in docs}
    one(docs, "ConfigMap", "-alert-rules")


def test_values_schema_rejects_unknown_keys() -> None:
    """values.schema.json rejects a misspelt key instead of ignoring it."""
    with pytest.raises(helm_python.HelmValuesError):
        render({"kafka": {"bootstrapServer": "kafka:9092"}})


# ---- pod security ------------------------------------------------------------------------------------------


def test_pods_meet_restricted_pod_security(docs: list[dict[str, Any]]) -> None:
    """Every pod spec (Deployments and the Job) runs as 10001 non-root, no escalation, ALL dropped, RuntimeDefault
    seccomp, read-only root."""
    specs = list(pod_specs(docs))
    assert {name.split("/")[0] for name, _ in specs} == POD_KINDS
    for name, spec in specs:
        pod = spec["securityContext"]
        assert pod["runAsNonRoot"] is True, name
        assert (pod["runAsUser"], pod["runAsGroup"]) == (10001, 10001), name
        assert pod["seccompProfile"] == {"type": "RuntimeDefault"}, name
        assert spec["automountServiceAccountToken"] is False, name
        assert not spec.get("hostNetwork") and not spec.get("hostPID") and not spec.get("hostIPC"), name
        for c in containers(spec):
            sc = c["securityContext"]
            where = f"{name}/{c['name']}"
            assert sc["runAsNonRoot"] is True, where
            assert (sc["runAsUser"], sc["runAsGroup"]) == (10001, 10001), where
            assert sc["allowPrivilegeEscalation"] is False, where
            assert sc["capabilities"] == {"drop": ["ALL"]}, where
            assert sc["seccompProfile"] == {"type": "RuntimeDefault"}, where
            assert sc["readOnlyRootFilesystem"] is True, where
            assert sc.get("privileged", False) is False, where


def test_tmp_is_a_writable_emptydir_and_home(docs: list[dict[str, Any]]) -> None:
    """With a read-only root, every container has an emptyDir at /tmp and HOME=/tmp."""
    for name, spec in pod_specs(docs):
        volumes = {v["name"]: v for v in spec["volumes"]}
        for c in containers(spec):
            tmp = [m for m in c["volumeMounts"] if m["mountPath"] == "/tmp"]
            assert len(tmp) == 1 and "emptyDir" in volumes[tmp[0]["name"]], f"{name}/{c['name']}"
            assert {"name": "HOME", "value": "/tmp"} in c["env"], f"{name}/{c['name']}"


def test_resources_set_on_every_container(docs: list[dict[str, Any]]) -> None:
    """Every container has CPU and memory requests and a memory limit."""
    for name, spec in pod_specs(docs):
        for c in containers(spec):
            assert {"cpu", "memory"} <= set(c["resources"]["requests"]), f"{name}/{c['name']}"
            assert "memory" in c["resources"]["limits"], f"{name}/{c['name']}"


def test_image_pinned_to_app_version(docs: list[dict[str, Any]]) -> None:
    """Every container runs the image.repository given at the chart's appVersion, never latest."""
    app_version = _chart().metadata["appVersion"]
    for name, spec in pod_specs(docs):
        for c in containers(spec):
            assert c["image"] == f"{IMAGE_REPOSITORY}:{app_version}", name
            assert c["command"] == ["relevancy-monitor"], name


def test_image_tag_latest_is_refused() -> None:
    """image.tag=latest fails the render."""
    with pytest.raises(helm_python.HelmError):
        render({"image": {"tag": "latest"}})


def test_commands_of_each_workload() -> None:
    """The consumer runs `run`, the evaluator `alerts run`, the hook Job `migrate`."""
    docs = list(_rendered("chart defaults"))
    args = {c["name"]: c["args"] for _, spec in pod_specs(docs) for c in containers(spec)}
    assert args == {"consumer": ["run"], "alert-evaluator": ["alerts", "run"], "migrate": ["migrate"]}


# ---- probes, ports, shutdown -------------------------------------------------------------------------------


def test_probes_use_health_endpoints_on_metrics_port(docs: list[dict[str, Any]]) -> None:
    """Deployments have startup and liveness probes on /healthz and readiness on /readyz, all on the metrics port
    (9108)."""
    for d in of_kind(docs, "Deployment"):
        for c in d["spec"]["template"]["spec"]["containers"]:
            where = f"{d['metadata']['name']}/{c['name']}"
            ports = {p["name"]: p["containerPort"] for p in c["ports"]}
            assert ports == {"metrics": 9108}, where
            for probe, path in (
                ("startupProbe", "/healthz"),
                ("livenessProbe", "/healthz"),
                ("readinessProbe", "/readyz"),
            ):
                get = c[probe]["httpGet"]
                assert get["path"] == path, f"{where} {probe}"
                assert ports.get(get["port"], get["port"]) == 9108, f"{where} {probe}"


def test_metrics_port_setting_matches_container_port(docs: list[dict[str, Any]]) -> None:
    """MONITOR_METRICS_PORT (consumer) and ALERTS_METRICS_PORT (evaluator) serve on the port the probes and Service
    use."""
    assert settings_of(docs, "consumer")["MONITOR_METRICS_PORT"] == "9108"
    assert settings_of(docs, "alert-evaluator")["ALERTS_METRICS_PORT"] == "9108"
    service = one(docs, "Service", "-metrics")
    assert service["spec"]["ports"] == [{"name": "metrics", "port": 9108, "targetPort": "metrics", "protocol": "TCP"}]


def test_termination_grace_exceeds_shutdown_grace(docs: list[dict[str, Any]]) -> None:
    """terminationGracePeriodSeconds of the consumer is above MONITOR_SHUTDOWN_GRACE_S, rendered from the same value."""
    grace = float(settings_of(docs, "consumer")["MONITOR_SHUTDOWN_GRACE_S"])
    consumer = one(docs, "Deployment", "-consumer")
    assert consumer["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] >= grace + 5


def test_termination_grace_follows_shutdown_grace_value() -> None:
    """Raising shutdownGraceSeconds raises both MONITOR_SHUTDOWN_GRACE_S and terminationGracePeriodSeconds."""
    docs = render({"shutdownGraceSeconds": 90})
    assert settings_of(docs, "consumer")["MONITOR_SHUTDOWN_GRACE_S"] == "90"
    assert one(docs, "Deployment", "-consumer")["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] == 105


# ---- secrets ----------------------------------------------------------------------------------------------


def test_no_secret_objects_or_values(docs: list[dict[str, Any]]) -> None:
    """No Secret is rendered; secret variables come only from secretKeyRef, never a literal or a ConfigMap key."""
    assert not of_kind(docs, "Secret")
    for cm in of_kind(docs, "ConfigMap"):
        assert not SECRET_ENV & set(cm.get("data", {})), cm["metadata"]["name"]
    for name, spec in pod_specs(docs):
        for c in containers(spec):
            for e in c.get("env", []):
                if e["name"] in SECRET_ENV:
                    assert set(e) == {"name", "valueFrom"} and "secretKeyRef" in e["valueFrom"], f"{name}: {e}"
    text = yaml.safe_dump_all(docs)
    assert not re.search(r"sk-ant-", text)
    assert not re.search(r"://[^/\s:@]+:[^/\s@]+@", text), "a URL with credentials was rendered"


def test_secrets_are_referenced_by_name() -> None:
    """With SASL and ClickHouse auth, the API key, SASL password and ClickHouse user/password come from the named
    Secrets."""
    docs = list(_rendered("all-features-values.yaml"))
    consumer = one(docs, "Deployment", "-consumer")["spec"]["template"]["spec"]["containers"][0]
    refs = {e["name"]: e["valueFrom"]["secretKeyRef"] for e in consumer["env"] if "valueFrom" in e}
    assert refs["MONITOR_ANTHROPIC_API_KEY"] == {"name": "anthropic", "key": "ANTHROPIC_API_KEY"}
    assert refs["MONITOR_KAFKA_SASL_PASSWORD"] == {"name": "kafka-sasl", "key": "password"}
    assert refs["MONITOR_CLICKHOUSE_USER"] == {"name": "clickhouse-credentials", "key": "username"}
    assert refs["MONITOR_CLICKHOUSE_PASSWORD"] == {"name": "clickhouse-credentials", "key": "password"}
    job = one(docs, "Job", "-migrate")["spec"]["template"]["spec"]["containers"][0]
    assert {"MONITOR_CLICKHOUSE_USER", "MONITOR_CLICKHOUSE_PASSWORD"} <= {
        e["name"] for e in job["env"] if "valueFrom" in e
    }


@pytest.mark.parametrize("url", ["https://monitor:secret@clickhouse:8443", "chdb:///tmp/chdb"])
def test_clickhouse_url_must_be_a_server_without_credentials(url: str) -> None:
    """A ClickHouse URL with user:password@, or an embedded chdb: one (not in the image), fails the values schema."""
    with pytest.raises(helm_python.HelmValuesError):
        render({"clickhouse": {"url": url}})


def test_secret_in_extra_settings_is_refused() -> None:
    """A password or API key put in extraSettings fails the render instead of landing in a ConfigMap."""
    with pytest.raises(helm_python.HelmRenderError, match="is a secret"):
        render({"extraSettings": {"MONITOR_KAFKA_SASL_PASSWORD": "hunter2"}})


def test_retention_days_are_rendered_only_when_set() -> None:
    """By default the chart leaves the TTLs alone, as the command line does; an explicit 0 (keep forever) is set."""
    for retention, wanted in ((None, None), (0, "0")):
        docs = render({"privacy": {"retentionDays": retention}})
        for kind, suffix in (("Job", "-migrate"), ("Deployment", "-consumer")):
            env = {
                e["name"]: e.get("value")
                for e in one(docs, kind, suffix)["spec"]["template"]["spec"]["containers"][0]["env"]
            }
            assert env.get("MONITOR_RETENTION_DAYS") == wanted, (kind, retention)


def test_privacy_values_reach_the_consumer_and_the_migrate_job() -> None:
    """privacy.* become MONITOR_REDACT and MONITOR_STORE_TEXT (settings) and the retention days on both the consumer
    and the migrate job (which applies the TTLs); a chart-owned setting in extraSettings fails the render."""
    docs = render({"privacy": {"redact": False, "storeText": "none", "retentionDays": 90, "textRetentionDays": 7}})
    data = one(docs, "ConfigMap", "-settings")["data"]
    assert (data["MONITOR_REDACT"], data["MONITOR_STORE_TEXT"]) == ("false", "none")
    for kind, suffix in (("Job", "-migrate"), ("Deployment", "-consumer")):
        env = {
            e["name"]: e.get("value")
            for e in one(docs, kind, suffix)["spec"]["template"]["spec"]["containers"][0]["env"]
        }
        assert (env["MONITOR_RETENTION_DAYS"], env["MONITOR_TEXT_RETENTION_DAYS"]) == ("90", "7"), kind
    with pytest.raises(helm_python.HelmRenderError, match="has its own value"):
        render({"extraSettings": {"MONITOR_STORE_TEXT": "full"}})
    with pytest.raises(helm_python.HelmValuesError):
        render({"privacy": {"storeText": "false"}})


def test_llm_judge_without_api_key_secret_fails() -> None:
    """An LLM judge with no judge.apiKey.existingSecret fails the render with a message naming the value."""
    with pytest.raises(helm_python.HelmRenderError, match=r"judge\.apiKey\.existingSecret is required"):
        render({"judge": {"apiKey": {"existingSecret": ""}}})
    assert "MONITOR_ANTHROPIC_API_KEY" not in env_names(
        render({"judge": {"method": "lexical", "apiKey": {"existingSecret": ""}}})
    )


# ---- settings names ------------------------------------------------------------------------------------------


def test_every_env_name_is_a_real_setting(docs: list[dict[str, Any]]) -> None:
    """Every MONITOR_*/ALERTS_* variable the chart sets is a field of Settings/AlertSettings (or ANTHROPIC_API_KEY)."""
    names = env_names(docs) - NON_SETTING_ENV
    unknown = names - real_settings()
    assert not unknown, f"not settings of monitor.config: {sorted(unknown)}"


def test_settings_values_are_accepted_by_monitor_config(docs: list[dict[str, Any]]) -> None:
    """The literal MONITOR_*/ALERTS_* values of each container validate as Settings/AlertSettings (mounted file paths
    aside)."""
    real = real_settings()
    for container in ("consumer", "alert-evaluator", "migrate"):
        env = {
            k: v
            for k, v in settings_of(docs, container).items()
            if k in real and not v.startswith("/etc/relevancy-monitor/")
        }
        monitor_fields = {f"MONITOR_{n.upper()}": n for n in FIELDS}
        alert_fields = {f"ALERTS_{n.upper()}": n for n in AlertSettings.model_fields}
        load_settings(**{monitor_fields[k]: v for k, v in env.items() if k in monitor_fields})
        AlertSettings.model_validate({alert_fields[k]: v for k, v in env.items() if k in alert_fields})


def test_kafka_tls_key_without_certificate_fails() -> None:
    """kafka.tls.keyKey without kafka.tls.certKey fails the render, as MONITOR_KAFKA_SSL_KEYFILE needs
    MONITOR_KAFKA_SSL_CERTFILE."""
    with pytest.raises(helm_python.HelmRenderError, match=r"kafka\.tls\.keyKey needs kafka\.tls\.certKey"):
        render({"kafka": {"tls": {"existingSecret": "kafka-tls", "keyKey": "tls.key"}}})


def test_sampling_and_alert_rules_files_parse(docs: list[dict[str, Any]], tmp_path: Path) -> None:
    """The mounted sampling file loads as a SamplingPolicy, the alert rules (when set) parse, and the env points at
    their mounts."""
    sampling = one(docs, "ConfigMap", "-sampling")["data"]["sampling.yaml"]
    (tmp_path / "sampling.yaml").write_text(sampling, encoding="utf-8")
    SamplingPolicy.from_yaml(tmp_path / "sampling.yaml", 1.0, "conversation_id")
    consumer = one(docs, "Deployment", "-consumer")["spec"]["template"]["spec"]
    mount = next(m for m in consumer["containers"][0]["volumeMounts"] if m["name"] == "sampling")
    assert settings_of(docs, "consumer")["MONITOR_SAMPLING_FILE"] == f"{mount['mountPath']}/sampling.yaml"
    rules = [cm for cm in of_kind(docs, "ConfigMap") if cm["metadata"]["name"].endswith("-alert-rules")]
    evaluator = settings_of(docs, "alert-evaluator")
    if rules:
        assert parse_rules(rules[0]["data"]["rules.yaml"], "rules.yaml").rules
        assert evaluator["ALERTS_RULES"] == "/etc/relevancy-monitor/alerts/rules.yaml"
    else:
        assert "ALERTS_RULES" not in evaluator


# ---- availability, scaling, hooks --------------------------------------------------------------------------


def test_pdb_allows_one_pod_down(docs: list[dict[str, Any]]) -> None:
    """The consumer's PodDisruptionBudget has maxUnavailable 1 and selects exactly the consumer pods."""
    pdb = one(docs, "PodDisruptionBudget", "-consumer")
    assert pdb["spec"]["maxUnavailable"] == 1
    consumer = one(docs, "Deployment", "-consumer")
    assert pdb["spec"]["selector"]["matchLabels"] == consumer["spec"]["selector"]["matchLabels"]


def test_alert_evaluator_replicas() -> None:
    """The evaluator defaults to one replica, accepts two, and refuses three (one is active through the lease)."""
    assert one(render(), "Deployment", "-alert-evaluator")["spec"]["replicas"] == 1
    assert one(render({"alertEvaluator": {"replicas": 2}}), "Deployment", "-alert-evaluator")["spec"]["replicas"] == 2
    with pytest.raises(helm_python.HelmError):
        render({"alertEvaluator": {"replicas": 3}})


def test_scaled_object_fields() -> None:
    """The KEDA ScaledObject targets the consumer with a kafka trigger on its group and topic, caps at the partitions
    and the judge quota, and stabilises scale-down."""
    docs = list(_rendered("all-features-values.yaml"))
    values = _values(CHART / "ci" / "all-features-values.yaml")
    so = one(docs, "ScaledObject")
    spec = so["spec"]
    assert so["apiVersion"] == "keda.sh/v1alpha1"
    assert set(spec) <= {
        "scaleTargetRef",
        "pollingInterval",
        "cooldownPeriod",
        "initialCooldownPeriod",
        "idleReplicaCount",
        "minReplicaCount",
        "maxReplicaCount",
        "fallback",
        "advanced",
        "triggers",
    }
    consumer = one(docs, "Deployment", "-consumer")
    assert spec["scaleTargetRef"] == {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "name": consumer["metadata"]["name"],
    }
    assert "replicas" not in consumer["spec"], "KEDA owns the replica count"
    assert spec["minReplicaCount"] == values["autoscaling"]["minReplicas"]
    quota_fed = values["judge"]["requestsPerMinute"] // 60  # the default minRequestsPerMinutePerReplica
    want = min(values["autoscaling"]["maxReplicas"], values["kafka"]["partitions"], quota_fed)
    assert spec["maxReplicaCount"] == want
    scale_down = spec["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]["scaleDown"]
    assert scale_down["stabilizationWindowSeconds"] >= 300
    assert scale_down["policies"] == [{"type": "Pods", "value": 1, "periodSeconds": 120}]
    [trigger] = spec["triggers"]
    assert trigger["type"] == "kafka"
    assert set(trigger) <= {"type", "name", "metadata", "authenticationRef", "metricType", "useCachedMetrics"}
    meta = trigger["metadata"]
    env = settings_of(docs, "consumer")
    assert meta["bootstrapServers"] == env["MONITOR_KAFKA_BOOTSTRAP_SERVERS"]
    assert meta["consumerGroup"] == env["MONITOR_KAFKA_GROUP_ID"]
    assert meta["topic"] in env["MONITOR_KAFKA_TOPICS"].split(",")
    assert meta["lagThreshold"] == "2000" and meta["activationLagThreshold"] == "200"
    assert meta["allowIdleConsumers"] == "false"
    assert all(isinstance(v, str) for v in meta.values()), "KEDA trigger metadata values are strings"
    assert trigger["authenticationRef"] == {"name": "kafka-trigger-auth"}


def test_max_replicas_above_partitions_fails() -> None:
    """autoscaling.maxReplicas above kafka.partitions fails the render with a message naming both values."""
    with pytest.raises(
        helm_python.HelmRenderError, match=r"autoscaling\.maxReplicas \(8\) must not exceed kafka\.partitions \(6\)"
    ):
        render({"autoscaling": {"enabled": True, "maxReplicas": 8}, "kafka": {"partitions": 6}})
    assert one(render({"autoscaling": {"enabled": True, "maxReplicas": 6}, "kafka": {"partitions": 6}}), "ScaledObject")


def test_optional_objects_off_by_default() -> None:
    """The defaults render no ScaledObject, ServiceMonitor or NetworkPolicy (they need KEDA / the Prometheus
    Operator)."""
    kinds = {d["kind"] for d in _rendered("chart defaults")}
    assert not {"ScaledObject", "ServiceMonitor", "NetworkPolicy", "PrometheusRule"} & kinds


def test_prometheus_rule_pages_on_failing_store_writes() -> None:
    """The PrometheusRule alerts on the consumer's failing-insert gauge past the configured seconds, in this
    namespace."""
    rule = one(list(_rendered("all-features-values.yaml")), "PrometheusRule")
    assert (
        rule["apiVersion"] == "monitoring.coreos.com/v1"
        and rule["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    )
    [group] = rule["spec"]["groups"]
    [alert] = group["rules"]
    assert (
        alert["alert"] == "RelevancyMonitorStoreWritesFailing"
        and alert["for"] == "2m"
        and alert["labels"] == {"severity": "page"}
    )
    assert (
        alert["expr"]
        == f'max by (namespace, pod) (relevancy_monitor_store_writes_failing_seconds{{namespace="{NAMESPACE}"}}) > 60'
    )
    assert "{{ $labels.pod }}" in alert["annotations"]["description"]


def test_service_monitor_scrapes_metrics_service() -> None:
    """The ServiceMonitor selects the metrics Service and scrapes its `metrics` port at /metrics."""
    docs = list(_rendered("all-features-values.yaml"))
    sm = one(docs, "ServiceMonitor")
    assert sm["apiVersion"] == "monitoring.coreos.com/v1"
    assert set(sm["spec"]) <= {
        "selector",
        "namespaceSelector",
        "endpoints",
        "jobLabel",
        "targetLabels",
        "podTargetLabels",
        "sampleLimit",
    }
    service = one(docs, "Service", "-metrics")
    assert sm["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    assert sm["spec"]["namespaceSelector"] == {"matchNames": [NAMESPACE]}
    [endpoint] = sm["spec"]["endpoints"]
    assert endpoint["port"] == "metrics" and endpoint["path"] == "/metrics"
    assert set(endpoint) <= {
        "port",
        "path",
        "interval",
        "scrapeTimeout",
        "scheme",
        "relabelings",
        "metricRelabelings",
        "honorLabels",
    }


def test_network_policy_allows_metrics_in_and_dns_out() -> None:
    """The NetworkPolicy selects the release's pods, lets only the metrics port in, and lets DNS and the configured
    ports out."""
    docs = list(_rendered("all-features-values.yaml"))
    np = one(docs, "NetworkPolicy")["spec"]
    assert np["policyTypes"] == ["Ingress", "Egress"]
    assert [p["port"] for rule in np["ingress"] for p in rule["ports"]] == ["metrics"]
    egress_ports = {p["port"] for rule in np["egress"] for p in rule["ports"]}
    assert {53, 9093, 8443, 443} <= egress_ports


def test_migrate_job_is_a_pre_install_and_pre_upgrade_hook(docs: list[dict[str, Any]]) -> None:
    """The migrate Job is a pre-install,pre-upgrade hook, replaced on re-run and removed on success, and runs without
    the chart's objects."""
    job = one(docs, "Job", "-migrate")
    annotations = job["metadata"]["annotations"]
    assert annotations["helm.sh/hook"] == "pre-install,pre-upgrade"
    assert set(annotations["helm.sh/hook-delete-policy"].split(",")) == {"before-hook-creation", "hook-succeeded"}
    spec = job["spec"]["template"]["spec"]
    assert spec["restartPolicy"] == "Never"
    # A pre-install hook runs before the release's ConfigMaps and ServiceAccount exist: the ConfigMaps it reads are
    # hooks of their own (tests/helm/test_cluster_install.py), and it runs without the chart's ServiceAccount.
    if any(d["kind"] == "ServiceAccount" for d in docs):
        assert "serviceAccountName" not in spec
    env = {e["name"] for e in spec["containers"][0]["env"]}
    assert {"MONITOR_CLICKHOUSE_URL", "MONITOR_CLICKHOUSE_DATABASE", "MONITOR_CLICKHOUSE_TABLE"} <= env
    assert settings_of(docs, "consumer")["MONITOR_AUTO_MIGRATE"] == "false"


def test_without_migrate_job_the_consumer_migrates() -> None:
    """migrate.enabled=false renders no Job and sets MONITOR_AUTO_MIGRATE=true on the consumer."""
    docs = render({"migrate": {"enabled": False}})
    assert not of_kind(docs, "Job")
    assert settings_of(docs, "consumer")["MONITOR_AUTO_MIGRATE"] == "true"


@pytest.mark.parametrize(
    ("rpm", "max_replicas", "partitions", "want", "why"),
    [
        ("", 8, 12, 8, "autoscaling.maxReplicas"),
        (600, 16, 24, 10, "capped by the judge quota"),
        (120, 8, 12, 2, "capped by the judge quota"),
        (30, 8, 12, 1, "capped by the judge quota"),
        (6000, 8, 6, None, ""),  # maxReplicas above the partitions still fails the render
    ],
)
def test_keda_never_starts_more_replicas_than_the_quota_feeds(
    rpm: str | int, max_replicas: int, partitions: int, want: int | None, why: str
) -> None:
    """maxReplicaCount is the least of maxReplicas, the partitions and requestsPerMinute / 60; NOTES says which."""
    values = {
        "autoscaling": {"enabled": True, "maxReplicas": max_replicas},
        "kafka": {"partitions": partitions},
        "judge": {"requestsPerMinute": rpm},
    }
    if want is None:
        with pytest.raises(Exception, match=r"must not exceed kafka\.partitions"):
            render(values)
        return
    scaled = one(render(values), "ScaledObject")
    assert scaled["spec"]["maxReplicaCount"] == want
    notes = _chart_notes(values)
    assert why in notes and f"and {want} replicas" in notes, notes


def _chart_notes(values: dict[str, Any]) -> str:
    """The rendered NOTES.txt for `values`."""
    manifests = _chart().render(with_required(values), name=RELEASE, namespace=NAMESPACE, is_install=True)
    return next(text for path, text in manifests.items() if path.endswith("NOTES.txt"))
