"""A cluster install (MONITOR_CLICKHOUSE_CLUSTER in `extraSettings`) as the migrate hook Job sees it: the Job runs
`relevancy-monitor migrate` with the consumer's settings, from the same sources, so the schema it creates is the
replicated ON CLUSTER one the consumer expects; the ConfigMaps it reads are hooks created before it; every file a
setting names is mounted where it points."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any

import pytest

from tests.helm.test_chart import CASES, CHART, _values, containers, of_kind, one, pod_specs, real_settings, render

CLUSTER = "prod_cluster"
# Credentials of the services `migrate` never contacts (the judge's API, Kafka): the consumer has them, the Job not.
NOT_FOR_MIGRATE = {
    "MONITOR_ANTHROPIC_API_KEY",
    "MONITOR_JUDGE_API_KEY",
    "MONITOR_SHADOW_JUDGE_API_KEY",
    "MONITOR_KAFKA_SASL_PASSWORD",
}
HOOK_EVENTS = {"pre-install", "pre-upgrade"}
Source = tuple[str, ...]


@dataclass(frozen=True)
class Install:
    """The values of a cluster install and the objects they render."""

    values: dict[str, Any]
    docs: tuple[dict[str, Any], ...]

    @property
    def objects(self) -> list[dict[str, Any]]:
        """The rendered objects."""
        return list(self.docs)


@cache
def _cluster_install(case: str) -> Install:
    values = {} if case == "chart defaults" else _values(CHART / "ci" / case)
    values = {**values, "extraSettings": {**values.get("extraSettings", {}), "MONITOR_CLICKHOUSE_CLUSTER": CLUSTER}}
    return Install(values, tuple(render(values)))


@pytest.fixture(params=CASES)
def install(request: pytest.FixtureRequest) -> Install:
    """A cluster install over the chart defaults and over each ci/*-values.yaml."""
    return _cluster_install(request.param)


def container_of(docs: list[dict[str, Any]], name: str) -> dict[str, Any]:
    """The container `name` of the Deployments and the Job."""
    [found] = [c for _, spec in pod_specs(docs) for c in containers(spec) if c["name"] == name]
    return found


def effective_env(docs: list[dict[str, Any]], name: str) -> dict[str, Source]:
    """The settings container `name` starts with, by variable, as (kind of source, what it reads): ("value", v) for
    what the chart writes (a key of an envFrom ConfigMap or a literal), ("Secret", name, key) for a secretKeyRef;
    envFrom first, then `env` entries, which win (as the kubelet has it)."""
    config_maps = {d["metadata"]["name"]: d.get("data", {}) for d in of_kind(docs, "ConfigMap")}
    c = container_of(docs, name)
    env: dict[str, Source] = {}
    for source in c.get("envFrom", []):
        env |= {k: ("value", v) for k, v in config_maps[source["configMapRef"]["name"]].items()}
    for e in c.get("env", []):
        ref = e.get("valueFrom", {})
        if "value" in e:
            env[e["name"]] = ("value", e["value"])
        elif "secretKeyRef" in ref:
            env[e["name"]] = ("Secret", ref["secretKeyRef"]["name"], ref["secretKeyRef"]["key"])
        elif "configMapKeyRef" in ref:
            key = ref["configMapKeyRef"]
            env[e["name"]] = ("value", config_maps[key["name"]][key["key"]])
        else:
            env[e["name"]] = ("field", repr(ref))
    real = real_settings()
    return {k: v for k, v in env.items() if k in real}


def test_the_migrate_job_has_the_consumers_settings_in_a_cluster_install(install: Install) -> None:
    """In a cluster install the Job's settings (the cluster among them) equal the consumer's, names and sources."""
    docs = install.objects
    consumer, job = effective_env(docs, "consumer"), effective_env(docs, "migrate")
    consumer_only = NOT_FOR_MIGRATE | {e["name"] for e in install.values.get("consumer", {}).get("extraEnv", [])}
    assert job.get("MONITOR_CLICKHOUSE_CLUSTER") == ("value", CLUSTER)
    assert job == {k: v for k, v in consumer.items() if k not in consumer_only}
    [from_config_map] = container_of(docs, "migrate")["envFrom"]
    config_map = one(docs, "ConfigMap", from_config_map["configMapRef"]["name"])
    assert config_map["data"]["MONITOR_CLICKHOUSE_CLUSTER"] == CLUSTER, "read from the ConfigMap, as the consumer"


def test_every_pod_has_the_same_store_settings(install: Install) -> None:
    """The consumer, the evaluator and the Job get the same store settings, cluster included, from the same sources."""
    docs = install.objects
    envs = {name: effective_env(docs, name) for name in ("consumer", "alert-evaluator", "migrate")}
    store = {
        name: {k: v for k, v in env.items() if k.startswith("MONITOR_CLICKHOUSE_") or "RETENTION" in k}
        for name, env in envs.items()
    }
    assert store["consumer"] == store["alert-evaluator"] == store["migrate"]
    assert store["migrate"]["MONITOR_CLICKHOUSE_CLUSTER"] == ("value", CLUSTER)
    job = envs["migrate"]
    for name in ("consumer", "alert-evaluator"):
        shared = envs[name].keys() & job.keys()
        assert {k: envs[name][k] for k in shared} == {k: job[k] for k in shared}, name


def test_the_configmaps_the_job_reads_are_created_before_it(install: Install) -> None:
    """Each ConfigMap the hook Job reads is an earlier hook holding the data of the Deployments' ConfigMap."""
    docs = install.objects
    job = one(docs, "Job", "-migrate")
    spec = job["spec"]["template"]["spec"]
    read = {s["configMapRef"]["name"] for c in containers(spec) for s in c.get("envFrom", [])}
    read |= {v["configMap"]["name"] for v in spec["volumes"] if "configMap" in v}
    assert read, "the Job reads its settings from a ConfigMap"
    config_maps = {d["metadata"]["name"]: d for d in of_kind(docs, "ConfigMap")}
    job_weight = int(job["metadata"]["annotations"]["helm.sh/hook-weight"])
    for name in read:
        annotations = config_maps[name]["metadata"].get("annotations", {})
        assert set(annotations.get("helm.sh/hook", "").split(",")) == HOOK_EVENTS, name
        assert int(annotations["helm.sh/hook-weight"]) < job_weight, name
        assert "before-hook-creation" in annotations["helm.sh/hook-delete-policy"].split(","), name
        release_copy = config_maps[name.removesuffix("-migrate")]
        assert "annotations" not in release_copy["metadata"], "the Deployments' copy is an ordinary release object"
        assert config_maps[name]["data"] == release_copy["data"], name


def test_every_file_a_setting_names_is_mounted(install: Install) -> None:
    """Each /etc/relevancy-monitor/ path in a container's settings is under one of its volume mounts."""
    docs = install.objects
    for _, spec in pod_specs(docs):
        for c in containers(spec):
            mounts = [m["mountPath"] for m in c["volumeMounts"]]
            for name, source in effective_env(docs, c["name"]).items():
                value = source[-1]
                if value.startswith("/etc/relevancy-monitor/"):
                    assert any(value.startswith(f"{m}/") for m in mounts), f"{c['name']}: {name}={value} not mounted"
