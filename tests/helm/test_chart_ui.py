"""The chart's optional web UI (`ui.*`): off by default; on, one replica of `relevancy-monitor ui` listening on the
pod's address behind a ClusterIP Service, probed on /healthz, with the store's settings; and the example that puts it
behind oauth2-proxy, where the UI trusts the reviewer header only because a NetworkPolicy lets the proxy alone in."""

from __future__ import annotations

from typing import Any

import helm_python
import kubernetes_validate  # type: ignore[import-untyped]
import pytest
import yaml

from schemas.settings import variables
from tests.helm import test_chart as chart
from tests.helm.test_chart import (
    CASES,
    CHART,
    CRDS,
    KUBE_VERSIONS,
    _chart_notes,
    _rendered,
    _values,
    containers,
    of_kind,
    one,
    real_settings,
    render,
    with_required,
)

EXAMPLE = CHART.parent.parent / "helm" / "examples" / "ui-behind-oauth2-proxy.yaml"


def ui_settings() -> set[str]:
    """The env names of `relevancy-monitor ui` alone (MONITOR_UI_*), besides the monitor's settings."""
    from monitor.ui.settings import UI_PREFIX, UiSettings

    return {v for name, field in UiSettings.model_fields.items() for v in variables(UI_PREFIX, name, field)}


UI_SECRET_ENV = chart.SECRET_ENV | {"MONITOR_UI_SECRET"}
PROXY = {"podSelector": {"matchLabels": {"app.kubernetes.io/name": "oauth2-proxy"}}}


def _ui_objects(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The objects of the UI component."""
    return [d for d in docs if d["metadata"].get("labels", {}).get("app.kubernetes.io/component") == "ui"]


def _ui_container(docs: list[dict[str, Any]]) -> dict[str, Any]:
    [container] = one(docs, "Deployment", "-ui")["spec"]["template"]["spec"]["containers"]
    assert container["name"] == "ui"
    return dict(container)


def _example() -> list[dict[str, Any]]:
    return render(_values(EXAMPLE))


@pytest.mark.parametrize("case", CASES)
def test_the_ui_is_off_by_default(case: str) -> None:
    """The defaults and every ci values file render no UI Deployment, Service or NetworkPolicy, and no alert links."""
    docs = list(_rendered(case))
    assert not _ui_objects(docs)
    assert not [d for d in docs if d["metadata"]["name"].endswith("-ui")]
    evaluator = one(docs, "Deployment", "-alert-evaluator")["spec"]["template"]["spec"]["containers"][0]
    assert "ALERTS_UI_URL" not in {e["name"] for e in evaluator["env"]}


@pytest.mark.parametrize("values", [{"ui": {"enabled": True}}, None], ids=["enabled", "oauth2-proxy example"])
def test_the_ui_renders_a_valid_deployment_and_service(values: dict[str, Any] | None) -> None:
    """Enabled, the UI is one Deployment (one replica, Recreate) and one ClusterIP Service on its port, both valid for
    every Kubernetes version in support, its pod as restricted as the others'."""
    docs = render(values) if values else _example()
    for version in KUBE_VERSIONS:
        for d in docs:
            if d["kind"] not in CRDS:
                kubernetes_validate.validate(d, version, strict=True)
    deployment = one(docs, "Deployment", "-ui")
    assert deployment["spec"]["replicas"] == 1 and deployment["spec"]["strategy"] == {"type": "Recreate"}
    service = one(docs, "Service", "-ui")
    assert service["spec"]["type"] == "ClusterIP"
    assert service["spec"]["ports"] == [{"name": "http", "port": 8787, "targetPort": "http", "protocol": "TCP"}]
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= pod_labels.items()
    assert deployment["spec"]["selector"]["matchLabels"] == service["spec"]["selector"]
    # Only the UI's pods: the consumer's and the evaluator's carry another component label.
    for other in ("-consumer", "-alert-evaluator"):
        labels = one(docs, "Deployment", other)["spec"]["template"]["metadata"]["labels"]
        assert not service["spec"]["selector"].items() <= labels.items(), other
    chart.test_pods_meet_restricted_pod_security(docs)
    chart.test_tmp_is_a_writable_emptydir_and_home(docs)
    chart.test_resources_set_on_every_container(docs)
    chart.test_image_pinned_to_app_version(docs)


def test_the_ui_listens_on_the_pod_address_and_is_probed_on_healthz() -> None:
    """The pod runs `ui --host 0.0.0.0 --port 8787` (never 127.0.0.1, which neither probes nor the Service reach), with
    liveness and readiness on GET /healthz of that port."""
    docs = render({"ui": {"enabled": True}})
    container = _ui_container(docs)
    assert container["args"] == ["ui", "--host", "0.0.0.0", "--port", "8787"]
    assert "127.0.0.1" not in yaml.safe_dump(one(docs, "Deployment", "-ui")), "the UI must not listen on loopback"
    assert "localhost" not in yaml.safe_dump(one(docs, "Deployment", "-ui"))
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {"http": 8787}
    for probe in ("livenessProbe", "readinessProbe"):
        get = container[probe]["httpGet"]
        assert get["path"] == "/healthz" and ports[get["port"]] == 8787, probe
    moved = _ui_container(render({"ui": {"enabled": True, "port": 9000}}))
    assert moved["args"][-1] == "9000" and moved["ports"][0]["containerPort"] == 9000


def test_the_ui_reads_the_store_the_other_workloads_write() -> None:
    """The UI gets the store's settings as the evaluator does (URL, database, table, credentials, a cluster's
    MONITOR_CLICKHOUSE_* extra settings) and what the store keeps of the text; every name is a setting."""
    values = {
        "ui": {"enabled": True},
        "clickhouse": {"auth": {"existingSecret": "clickhouse-credentials"}},
        "extraSettings": {"MONITOR_CLICKHOUSE_CLUSTER": "prod_cluster"},
        "privacy": {"storeText": "none"},
    }
    docs = render(values)
    ui = {e["name"]: e for e in _ui_container(docs)["env"]}
    evaluator = {
        e["name"]: e
        for e in one(docs, "Deployment", "-alert-evaluator")["spec"]["template"]["spec"]["containers"][0]["env"]
    }
    for name in ("MONITOR_CLICKHOUSE_URL", "MONITOR_CLICKHOUSE_DATABASE", "MONITOR_CLICKHOUSE_TABLE"):
        assert ui[name] == evaluator[name], name
    assert ui["MONITOR_CLICKHOUSE_USER"]["valueFrom"]["secretKeyRef"]["name"] == "clickhouse-credentials"
    assert ui["MONITOR_CLICKHOUSE_CLUSTER"]["value"] == "prod_cluster"
    assert ui["MONITOR_STORE_TEXT"]["value"] == "none"
    assert "MONITOR_UI_USER_HEADER" not in ui, "no header configured: the UI trusts none"
    unknown = set(ui) - chart.NON_SETTING_ENV - real_settings() - ui_settings()
    assert not unknown, f"not settings of the monitor: {sorted(unknown)}"


def test_the_oauth2_proxy_example_trusts_the_header_only_from_the_proxy() -> None:
    """The example sets MONITOR_UI_USER_HEADER=X-Forwarded-Email, the CSRF key and the UI's own ClickHouse user from
    Secrets, the evaluator's alert links, and a NetworkPolicy that lets only the oauth2-proxy pods reach the UI port."""
    docs = _example()
    env = {e["name"]: e for e in _ui_container(docs)["env"]}
    assert env["MONITOR_UI_USER_HEADER"] == {"name": "MONITOR_UI_USER_HEADER", "value": "X-Forwarded-Email"}
    assert env["MONITOR_UI_SECRET"]["valueFrom"]["secretKeyRef"] == {
        "name": "relevancy-monitor-ui",
        "key": "csrf-secret",
    }
    assert env["MONITOR_CLICKHOUSE_USER"]["valueFrom"]["secretKeyRef"]["name"] == "relevancy-monitor-ui-clickhouse"
    unknown = set(env) - chart.NON_SETTING_ENV - real_settings() - ui_settings()
    assert not unknown, f"not settings of the monitor: {sorted(unknown)}"
    consumer = {
        e["name"]: e for e in one(docs, "Deployment", "-consumer")["spec"]["template"]["spec"]["containers"][0]["env"]
    }
    assert "MONITOR_CLICKHOUSE_USER" not in consumer, "the UI's user is the UI's alone"
    for _, spec in chart.pod_specs(docs):
        for c in containers(spec):
            for e in c.get("env", []):
                if e["name"] in UI_SECRET_ENV:
                    assert set(e) == {"name", "valueFrom"} and "secretKeyRef" in e["valueFrom"], e
    evaluator = one(docs, "Deployment", "-alert-evaluator")["spec"]["template"]["spec"]["containers"][0]["env"]
    assert {"name": "ALERTS_UI_URL", "value": "https://relevancy.example.com"} in evaluator

    policy = one(docs, "NetworkPolicy", "-ui")["spec"]
    pod_labels = one(docs, "Deployment", "-ui")["spec"]["template"]["metadata"]["labels"]
    assert policy["podSelector"]["matchLabels"].items() <= pod_labels.items()
    assert policy["podSelector"]["matchLabels"]["app.kubernetes.io/component"] == "ui"
    assert policy["policyTypes"] == ["Ingress"]
    [rule] = policy["ingress"]
    assert rule["ports"] == [{"port": "http", "protocol": "TCP"}]
    [peer] = rule["from"]
    assert peer == {
        "podSelector": {
            "matchLabels": {"app.kubernetes.io/name": "oauth2-proxy", "app.kubernetes.io/instance": "ui-proxy"}
        }
    }


@pytest.mark.parametrize("kube", [KUBE_VERSIONS[0], KUBE_VERSIONS[-1]])
def test_the_example_lints_clean(kube: str) -> None:
    """`helm lint --strict` of the oauth2-proxy example reports no warning or error."""
    report = helm_python.lint(CHART, with_required(_values(EXAMPLE)), strict=True, kube_version=f"v{kube}")
    assert not report["errors"], report["errors"]
    assert not [m for m in report["messages"] if m["severity"] >= 2]


@pytest.mark.parametrize(
    "ui",
    [
        {"userHeader": "X-Forwarded-Email"},
        {"userHeader": "X-Forwarded-Email", "networkPolicy": {"enabled": False, "from": [PROXY]}},
    ],
    ids=["no peers", "policy off"],
)
def test_a_trusted_header_without_the_policy_fails(ui: dict[str, Any]) -> None:
    """ui.userHeader without a UI NetworkPolicy naming who may connect fails the render, naming the value to set."""
    with pytest.raises(helm_python.HelmRenderError, match=r"ui\.networkPolicy\.from"):
        render({"ui": {"enabled": True, **ui}})


def test_without_a_header_the_policy_lets_the_cluster_in_on_the_ui_port_only() -> None:
    """A read-only UI (no ui.userHeader) gets a policy opening its port alone; ui.networkPolicy.enabled=false drops
    it."""
    policy = one(render({"ui": {"enabled": True}}), "NetworkPolicy", "-ui")["spec"]
    assert policy["ingress"] == [{"ports": [{"port": "http", "protocol": "TCP"}]}]
    docs = render({"ui": {"enabled": True, "networkPolicy": {"enabled": False}}})
    assert not of_kind(docs, "NetworkPolicy")


def test_the_release_policy_and_the_ui_policy_render_together() -> None:
    """With networkPolicy.enabled too, both policies render, each valid, the UI's after the release's."""
    values = {"networkPolicy": {"enabled": True}, "ui": {"enabled": True, "networkPolicy": {"from": [PROXY]}}}
    docs = render(values)
    names = sorted(d["metadata"]["name"] for d in of_kind(docs, "NetworkPolicy"))
    assert names == ["rm-relevancy-monitor", "rm-relevancy-monitor-ui"]
    for d in of_kind(docs, "NetworkPolicy"):
        kubernetes_validate.validate(d, KUBE_VERSIONS[-1], strict=True)


@pytest.mark.parametrize(
    ("values", "error", "match"),
    [
        ({"ui": {"enabled": True, "replicas": 2}}, helm_python.HelmValuesError, "replicas"),  # one replica, no value
        ({"ui": {"enabled": True, "service": {"type": "LoadBalancer"}}}, helm_python.HelmValuesError, "service"),
        ({"ui": {"enabled": True, "userHeader": "X Forwarded Email"}}, helm_python.HelmValuesError, "userHeader"),
        ({"ui": {"enabled": True, "extraSettings": {"MONITOR_UI_SECRET": "x"}}}, helm_python.HelmRenderError, "secret"),
        (
            {"ui": {"enabled": True, "extraSettings": {"MONITOR_UI_USER_HEADERS": "x"}}},
            helm_python.HelmRenderError,
            r"ui\.extraSettings: MONITOR_UI_USER_HEADERS is not a setting",
        ),
        (
            {"ui": {"enabled": True, "extraSettings": {"MONITOR_KAFKA_TOPICS": "x"}}},
            helm_python.HelmValuesError,
            "MONITOR_KAFKA_TOPICS",
        ),
        (
            {"ui": {"publicUrl": "https://a.example"}, "alertEvaluator": {"extraSettings": {"ALERTS_UI_URL": "x"}}},
            helm_python.HelmRenderError,
            r"ALERTS_UI_URL has its own value in this chart \(ui\.publicUrl\)",
        ),
    ],
    ids=["replicas", "load balancer", "bad header", "secret", "misspelt", "not a ui setting", "url twice"],
)
def test_what_the_ui_values_refuse(values: dict[str, Any], error: type[Exception], match: str) -> None:
    """No replica count and no Service type to set, a header name that is a token, no secret or unknown name in
    ui.extraSettings, and the alert links' URL in one place."""
    with pytest.raises(error, match=match):
        render(values)


def test_notes_name_the_ui_and_how_it_is_reached() -> None:
    """NOTES.txt names the UI's Service, who labels (the header, or nobody), the Secrets it reads and the alert
    links."""
    notes = _chart_notes(_values(EXAMPLE))
    assert "service/rm-relevancy-monitor-ui port 8787" in notes
    assert "reviewers named by the X-Forwarded-Email header" in notes
    assert "relevancy-monitor-ui (key csrf-secret): MONITOR_UI_SECRET" in notes
    assert "relevancy-monitor-ui-clickhouse (keys username, password)" in notes
    assert "under https://relevancy.example.com (ALERTS_UI_URL)" in notes
    assert "port-forward service/" not in notes, "with a trusted header, a port-forward would go around the proxy"
    read_only = _chart_notes({"ui": {"enabled": True}})
    assert "read-only: no ui.userHeader, so nobody can label" in read_only
    assert "port-forward service/rm-relevancy-monitor-ui 8787, then http://127.0.0.1:8787" in read_only
    assert "Web UI" not in _chart_notes({})


def test_the_example_file_is_where_the_docs_say() -> None:
    """The example values file exists and layers over a minimal install without other changes."""
    assert EXAMPLE.is_file()
    assert set(_values(EXAMPLE)) == {"ui"}


def test_review_routes_are_mounted_where_the_setting_points() -> None:
    """ui.reviewRoutes renders a ConfigMap the UI mounts, MONITOR_REVIEW_ROUTES names the mounted file, and it parses as
    the review queue's routing rules; without it the UI keeps the rules shipped in the image."""
    from monitor.review.routing import parse_routing

    shipped = yaml.safe_load((CHART.parent.parent / "monitor" / "review" / "default_routes.yaml").read_text("utf-8"))
    routes = {**shipped, "shares": {"control": 0.5, "disagree": 0.2, "borderline": 0.2, "firing": 0.1}}
    docs = render({"ui": {"enabled": True, "reviewRoutes": routes}})
    text = one(docs, "ConfigMap", "-review-routes")["data"]["routes.yaml"]
    assert parse_routing(text, "routes.yaml").shares["control"] == 0.5
    env = {e["name"]: e.get("value") for e in _ui_container(docs)["env"]}
    mount = next(m for m in _ui_container(docs)["volumeMounts"] if m["name"] == "review-routes")
    assert env["MONITOR_REVIEW_ROUTES"] == f"{mount['mountPath']}/routes.yaml"
    default = render({"ui": {"enabled": True}})
    assert not [d for d in default if d["metadata"]["name"].endswith("-review-routes")]
    assert "MONITOR_REVIEW_ROUTES" not in {e["name"] for e in _ui_container(default)["env"]}
