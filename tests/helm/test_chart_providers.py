"""The judge's provider in the chart: `judge.provider`, `baseUrl`, `model`, `region`, `project`, `structuredOutput`,
the key of each provider (a Secret for anthropic, openai and azure_openai; the ServiceAccount's cloud identity for
bedrock and vertex) and the same for the shadow judge (`judge.shadow`).

Each configuration is rendered offline, validated against the Kubernetes schemas, and its env is loaded by
`monitor.config.load_settings` as the pod would (Secret references stand in as placeholders) and checked with
`JudgeSettings.check_provider`: what the chart renders is a configuration the monitor starts with."""

from __future__ import annotations

import os
from typing import Any

import helm_python
import kubernetes_validate
import pytest

from monitor.config import Settings, load_settings
from tests.helm.test_chart import CRDS, KUBE_VERSIONS, _chart_notes, of_kind, one, pod_specs, render, settings_of

# The settings of the chart's defaults before providers existed, as the chart rendered them: an upgrade that keeps
# its values must render exactly these (no new variable, so no rollout and the same judge_id).
OLD_DEFAULT_SETTINGS = {
    "MONITOR_AUTO_MIGRATE": "false",
    "MONITOR_DLQ_CREATE": "true",
    "MONITOR_DLQ_TOPIC": "relevancy-monitor.dlq",
    "MONITOR_JUDGE": "rubric",
    "MONITOR_JUDGE_CONCURRENCY": "8",
    "MONITOR_JUDGE_MODEL": "claude-haiku-5-5",
    "MONITOR_KAFKA_AUTO_OFFSET_RESET": "earliest",
    "MONITOR_KAFKA_BOOTSTRAP_SERVERS": "kafka:9092",
    "MONITOR_KAFKA_GROUP_ID": "relevancy-monitor",
    "MONITOR_KAFKA_SECURITY_PROTOCOL": "PLAINTEXT",
    "MONITOR_KAFKA_TOPICS": "conversations",
    "MONITOR_METRICS_PORT": "9108",
    "MONITOR_REDACT": "true",
    "MONITOR_SAMPLING_FILE": "/etc/relevancy-monitor/sampling/sampling.yaml",
    "MONITOR_SHUTDOWN_GRACE_S": "20",
    "MONITOR_STORE_TEXT": "redacted",
}
OLD_DEFAULT_KEY = {
    "name": "MONITOR_ANTHROPIC_API_KEY",
    "valueFrom": {"secretKeyRef": {"key": "api-key", "name": "anthropic-api-key"}},
}
OLD_EVALUATOR_JUDGE_ENV = [
    {"name": "MONITOR_JUDGE", "value": "rubric"},
    {"name": "MONITOR_JUDGE_MODEL", "value": "claude-haiku-5-5"},
    {"name": "MONITOR_JUDGE_CONCURRENCY", "value": "8"},
    {"name": "MONITOR_REDACT", "value": "true"},
    OLD_DEFAULT_KEY,
]
# Every variable that carries a judge key: only ever from a Secret.
KEY_ENV = {"MONITOR_ANTHROPIC_API_KEY", "MONITOR_JUDGE_API_KEY", "MONITOR_SHADOW_JUDGE_API_KEY"}
PROVIDER_SETTINGS = {
    "MONITOR_JUDGE_PROVIDER",
    "MONITOR_JUDGE_BASE_URL",
    "MONITOR_JUDGE_REGION",
    "MONITOR_JUDGE_PROJECT",
    "MONITOR_JUDGE_STRUCTURED_OUTPUT",
}

VLLM = {
    "provider": "openai",
    "baseUrl": "http://vllm:8000/v1",
    "model": "Qwen/Qwen2.5-7B-Instruct",
    "apiKey": {"existingSecret": "vllm-api-key", "key": "token"},
}
VLLM_SETTINGS = ("openai", "http://vllm:8000/v1", "Qwen/Qwen2.5-7B-Instruct")  # provider, endpoint, model
BEDROCK = {"provider": "bedrock", "model": "us.anthropic.claude-haiku-4-5-20251001-v1:0", "region": "us-east-1"}
VERTEX = {"provider": "vertex", "model": "claude-haiku-4-5@20251001", "region": "us-east5", "project": "acme-ml"}
IRSA = {"eks.amazonaws.com/role-arn": "arn:aws:iam::111122223333:role/relevancy-monitor-bedrock"}
WORKLOAD_IDENTITY = {"iam.gke.io/gcp-service-account": "relevancy-monitor@acme-ml.iam.gserviceaccount.com"}


def container(docs: list[dict[str, Any]], suffix: str) -> dict[str, Any]:
    """The main container of the Deployment named *suffix."""
    return dict(one(docs, "Deployment", suffix)["spec"]["template"]["spec"]["containers"][0])


def key_refs(docs: list[dict[str, Any]], suffix: str) -> dict[str, dict[str, str]]:
    """The judge-key env entries of a Deployment's container, by name, as their secretKeyRef."""
    return {e["name"]: e["valueFrom"]["secretKeyRef"] for e in container(docs, suffix)["env"] if e["name"] in KEY_ENV}


def validated(values: dict[str, Any]) -> list[dict[str, Any]]:
    """The objects rendered from `values`, each non-CRD one validated (strict) for every Kubernetes version in
    support."""
    docs = render(values)
    for version in KUBE_VERSIONS:
        for d in docs:
            if d["kind"] not in CRDS:
                kubernetes_validate.validate(d, version, strict=True)
    return docs


def monitor_settings(docs: list[dict[str, Any]], name: str, monkeypatch: pytest.MonkeyPatch) -> Settings:
    """The settings container `name` starts with: its literal env and its Secret references (as placeholders) in the
    environment, as the pod has them, loaded by `load_settings` (the mounted sampling file left out)."""
    for variable in list(os.environ):
        if variable.startswith(("MONITOR_", "ALERTS_", "ANTHROPIC_", "OPENAI_", "AZURE_OPENAI_")):
            monkeypatch.delenv(variable)
    env = settings_of(docs, name)
    env.pop("MONITOR_SAMPLING_FILE", None)
    for variable, value in env.items():
        if variable.startswith("MONITOR_"):
            monkeypatch.setenv(variable, value)
    for _, spec in pod_specs(docs):
        for c in spec["containers"]:
            if c["name"] == name:
                for e in c["env"]:
                    if "secretKeyRef" in e.get("valueFrom", {}):
                        monkeypatch.setenv(e["name"], f"placeholder-from-{e['valueFrom']['secretKeyRef']['name']}")
    return load_settings()


# ---- the values of earlier releases --------------------------------------------------------------------------


def test_the_old_anthropic_values_render_the_same_env() -> None:
    """The chart's defaults and a values file written before providers existed render the settings, keys and canary
    env they rendered before: no provider variable is added for the anthropic provider."""
    docs = validated({})
    assert one(docs, "ConfigMap", "-settings")["data"] == OLD_DEFAULT_SETTINGS
    assert [e for e in container(docs, "-consumer")["env"] if e["name"] in KEY_ENV] == [OLD_DEFAULT_KEY]
    evaluator = container(docs, "-alert-evaluator")["env"]
    start = next(i for i, e in enumerate(evaluator) if e["name"] == "MONITOR_JUDGE")
    assert evaluator[start : start + len(OLD_EVALUATOR_JUDGE_ENV)] == OLD_EVALUATOR_JUDGE_ENV
    assert not PROVIDER_SETTINGS & {e["name"] for e in evaluator}

    old = {"judge": {"method": "statements", "model": "claude-sonnet-4-5", "apiKey": {"existingSecret": "anthropic"}}}
    docs = render(old)
    data = one(docs, "ConfigMap", "-settings")["data"]
    assert (data["MONITOR_JUDGE"], data["MONITOR_JUDGE_MODEL"]) == ("statements", "claude-sonnet-4-5")
    assert not (PROVIDER_SETTINGS | {"MONITOR_SHADOW_JUDGE"}) & set(data)
    for suffix in ("-consumer", "-alert-evaluator"):
        assert key_refs(docs, suffix) == {"MONITOR_ANTHROPIC_API_KEY": {"name": "anthropic", "key": "api-key"}}


def test_the_anthropic_provider_named_explicitly_renders_as_the_default() -> None:
    """judge.provider=anthropic with structuredOutput auto writes nothing new: it is the monitor's default."""
    assert render({"judge": {"provider": "anthropic", "structuredOutput": "auto"}}) == render({})


# ---- one configuration per provider --------------------------------------------------------------------------


def test_openai_compatible_server_with_base_url_and_a_key_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    """provider openai with a baseUrl and a key Secret: the provider, endpoint and model reach the consumer and the
    canary, the key comes from the Secret as MONITOR_JUDGE_API_KEY (never the Anthropic variable), the NetworkPolicy
    lets the server's port out, and the monitor accepts the result."""
    docs = validated({"judge": VLLM, "networkPolicy": {"enabled": True}})
    data = one(docs, "ConfigMap", "-settings")["data"]
    assert {k: data[k] for k in ("MONITOR_JUDGE_PROVIDER", "MONITOR_JUDGE_BASE_URL", "MONITOR_JUDGE_MODEL")} == {
        "MONITOR_JUDGE_PROVIDER": "openai",
        "MONITOR_JUDGE_BASE_URL": "http://vllm:8000/v1",
        "MONITOR_JUDGE_MODEL": "Qwen/Qwen2.5-7B-Instruct",
    }
    evaluator = settings_of(docs, "alert-evaluator")
    for name in ("MONITOR_JUDGE_PROVIDER", "MONITOR_JUDGE_BASE_URL", "MONITOR_JUDGE_MODEL"):
        assert evaluator[name] == data[name], name
    for suffix in ("-consumer", "-alert-evaluator"):
        assert key_refs(docs, suffix) == {"MONITOR_JUDGE_API_KEY": {"name": "vllm-api-key", "key": "token"}}
    egress = {p["port"] for rule in one(docs, "NetworkPolicy")["spec"]["egress"] for p in rule["ports"]}
    assert 8000 in egress
    assert "vllm-api-key (key token): MONITOR_JUDGE_API_KEY" in _chart_notes({"judge": VLLM})
    for name in ("consumer", "alert-evaluator"):
        judge = monitor_settings(docs, name, monkeypatch).judge
        assert (judge.provider, judge.effective_base_url, judge.model) == VLLM_SETTINGS
        assert judge.effective_api_key is not None
        assert judge.effective_api_key.get_secret_value() == "placeholder-from-vllm-api-key"
        judge.check_provider()


def test_a_server_of_your_own_without_auth_needs_no_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    """provider openai with a baseUrl and an empty key Secret renders no key at all, and the monitor starts so."""
    docs = validated({"judge": {**VLLM, "apiKey": {"existingSecret": ""}}})
    assert key_refs(docs, "-consumer") == {} and key_refs(docs, "-alert-evaluator") == {}
    judge = monitor_settings(docs, "consumer", monkeypatch).judge
    assert judge.effective_api_key is None
    judge.check_provider()


def test_bedrock_with_an_irsa_annotation_and_no_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """provider bedrock takes its credentials from the ServiceAccount (IRSA annotation), so no pod reads a key
    Secret, even with the Anthropic default secret name left in the values; both judging pods run as that
    ServiceAccount."""
    docs = validated({"judge": BEDROCK, "serviceAccount": {"annotations": IRSA}})
    account = one(docs, "ServiceAccount")
    assert account["metadata"]["annotations"] == IRSA
    for suffix in ("-consumer", "-alert-evaluator"):
        spec = one(docs, "Deployment", suffix)["spec"]["template"]["spec"]
        assert spec["serviceAccountName"] == account["metadata"]["name"], suffix
        assert key_refs(docs, suffix) == {}, suffix
    assert not [e for _, spec in pod_specs(docs) for c in spec["containers"] for e in c["env"] if e["name"] in KEY_ENV]
    data = one(docs, "ConfigMap", "-settings")["data"]
    assert (data["MONITOR_JUDGE_PROVIDER"], data["MONITOR_JUDGE_REGION"]) == ("bedrock", "us-east-1")
    assert "IRSA or EKS Pod Identity" in _chart_notes({"judge": BEDROCK, "serviceAccount": {"annotations": IRSA}})
    for name in ("consumer", "alert-evaluator"):
        judge = monitor_settings(docs, name, monkeypatch).judge
        assert (judge.provider, judge.region, judge.effective_api_key) == ("bedrock", "us-east-1", None)
        judge.check_provider()


def test_vertex_with_workload_identity(monkeypatch: pytest.MonkeyPatch) -> None:
    """provider vertex takes Workload Identity from the ServiceAccount's annotation; region, project and a fixed
    structured-output mode reach the consumer and the canary; no key Secret is read."""
    values = {"judge": {**VERTEX, "structuredOutput": "tools"}, "serviceAccount": {"annotations": WORKLOAD_IDENTITY}}
    docs = validated(values)
    assert one(docs, "ServiceAccount")["metadata"]["annotations"] == WORKLOAD_IDENTITY
    assert key_refs(docs, "-consumer") == {} and key_refs(docs, "-alert-evaluator") == {}
    for name in ("consumer", "alert-evaluator"):
        judge = monitor_settings(docs, name, monkeypatch).judge
        assert (judge.provider, judge.region, judge.project, judge.structured_output) == (
            "vertex",
            "us-east5",
            "acme-ml",
            "tools",
        )
        judge.check_provider()


def test_azure_openai_with_its_endpoint_and_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """provider azure_openai: the deployment as the model, the resource's v1 endpoint, the key as
    MONITOR_JUDGE_API_KEY."""
    azure = {
        "provider": "azure_openai",
        "model": "judge-gpt-4-1-mini",
        "baseUrl": "https://acme.openai.azure.com/openai/v1",
        "apiKey": {"existingSecret": "azure-openai", "key": "api-key"},
    }
    docs = validated({"judge": azure})
    assert key_refs(docs, "-consumer") == {"MONITOR_JUDGE_API_KEY": {"name": "azure-openai", "key": "api-key"}}
    judge = monitor_settings(docs, "consumer", monkeypatch).judge
    assert judge.provider == "azure_openai"
    judge.check_provider()


# ---- the shadow judge ------------------------------------------------------------------------------------------


def test_a_local_shadow_of_an_anthropic_primary(monkeypatch: pytest.MonkeyPatch) -> None:
    """judge.shadow puts a vLLM shadow beside the Anthropic primary: its settings reach the consumer only (the canary
    judges with the primary), it reads no key, and the monitor builds it as another provider's judge."""
    shadow = {
        "method": "rubric",
        "provider": "openai",
        "model": "Qwen/Qwen2.5-7B-Instruct",
        "baseUrl": "http://vllm:8000/v1",
        "sampleRate": 0.1,
    }
    docs = validated({"judge": {"shadow": shadow}, "networkPolicy": {"enabled": True}})
    data = one(docs, "ConfigMap", "-settings")["data"]
    assert data["MONITOR_SHADOW_JUDGE_PROVIDER"] == "openai" and data["MONITOR_SHADOW_SAMPLE_RATE"] == "0.1"
    assert not {n for n in settings_of(docs, "alert-evaluator") if n.startswith("MONITOR_SHADOW_")}
    assert set(key_refs(docs, "-consumer")) == {"MONITOR_ANTHROPIC_API_KEY"}
    egress = {p["port"] for rule in one(docs, "NetworkPolicy")["spec"]["egress"] for p in rule["ports"]}
    assert 8000 in egress
    settings = monitor_settings(docs, "consumer", monkeypatch)
    assert settings.shadow_judge is not None
    assert (settings.shadow_judge.provider, settings.shadow_judge.effective_base_url) == VLLM_SETTINGS[:2]
    settings.shadow_judge.check_provider()


def test_a_shadow_with_a_key_of_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    """An Anthropic shadow of a vLLM primary reads its own Secret as MONITOR_SHADOW_JUDGE_API_KEY; a shadow of the
    primary's provider without one makes the consumer read the primary's key, even under a lexical primary."""
    shadow = {
        "method": "statements",
        "provider": "anthropic",
        "model": "claude-haiku-5-5",
        "apiKey": {"existingSecret": "anthropic-api-key", "key": "api-key"},
    }
    docs = validated({"judge": {**VLLM, "shadow": shadow}})
    assert key_refs(docs, "-consumer") == {
        "MONITOR_JUDGE_API_KEY": {"name": "vllm-api-key", "key": "token"},
        "MONITOR_SHADOW_JUDGE_API_KEY": {"name": "anthropic-api-key", "key": "api-key"},
    }
    assert set(key_refs(docs, "-alert-evaluator")) == {"MONITOR_JUDGE_API_KEY"}
    settings = monitor_settings(docs, "consumer", monkeypatch)
    assert settings.shadow_judge is not None and settings.shadow_judge.provider == "anthropic"
    settings.shadow_judge.check_provider()

    docs = render({"judge": {"method": "lexical", "shadow": {"method": "rubric"}}})
    assert set(key_refs(docs, "-consumer")) == {"MONITOR_ANTHROPIC_API_KEY"}
    assert key_refs(docs, "-alert-evaluator") == {}


def test_the_shadow_settings_of_extra_settings_still_work() -> None:
    """MONITOR_SHADOW_JUDGE and _MODEL in extraSettings (the way before judge.shadow) still render; with judge.shadow
    set as well they are refused as the chart's own."""
    extra = {"MONITOR_SHADOW_JUDGE": "statements", "MONITOR_SHADOW_JUDGE_MODEL": "claude-sonnet-4-5"}
    data = one(render({"extraSettings": extra}), "ConfigMap", "-settings")["data"]
    assert extra.items() <= data.items()
    with pytest.raises(helm_python.HelmRenderError, match="MONITOR_SHADOW_JUDGE has its own value"):
        render({"extraSettings": extra, "judge": {"shadow": {"method": "rubric"}}})


# ---- what fails the render -------------------------------------------------------------------------------------

REFUSED: list[tuple[str, dict[str, Any], str]] = [
    ("no model", {"judge": {"provider": "openai", "baseUrl": "http://vllm:8000/v1"}}, r"judge\.model is required"),
    (
        "the Anthropic secret for another provider",
        {"judge": {**VLLM, "apiKey": {"existingSecret": "anthropic-api-key"}}},
        r"anthropic-api-key, the chart's default for the anthropic provider",
    ),
    (
        "OpenAI itself without a key",
        {"judge": {"provider": "openai", "model": "gpt-4.1-mini", "apiKey": {"existingSecret": ""}}},
        r"judge\.apiKey\.existingSecret is required with judge\.provider=openai and no judge\.baseUrl",
    ),
    (
        "azure without its endpoint",
        {"judge": {"provider": "azure_openai", "model": "d", "apiKey": {"existingSecret": "k"}}},
        r"judge\.baseUrl is required with judge\.provider=azure_openai",
    ),
    ("vertex without a region", {"judge": {**VERTEX, "region": ""}}, r"judge\.region is required with the vertex"),
    ("bedrock without a region", {"judge": {**BEDROCK, "region": ""}}, r"judge\.region is required with the bedrock"),
    (
        "a shadow of another provider without a model",
        {"judge": {"shadow": {"method": "rubric", "provider": "openai", "baseUrl": "http://vllm:8000/v1"}}},
        r"judge\.shadow\.model is required",
    ),
    (
        "an Anthropic shadow without a key under another primary",
        {"judge": {**VLLM, "shadow": {"method": "rubric", "provider": "anthropic", "model": "claude-haiku-5-5"}}},
        r"judge\.shadow\.apiKey\.existingSecret is required",
    ),
    (
        "a shadow value without a shadow judge",
        {"judge": {"shadow": {"model": "claude-sonnet-4-5"}}},
        r"judge\.shadow\.model is set but judge\.shadow\.method is empty",
    ),
    (
        "the provider in extraSettings",
        {"extraSettings": {"MONITOR_JUDGE_PROVIDER": "openai"}},
        r"MONITOR_JUDGE_PROVIDER has its own value",
    ),
    (
        "a misspelt provider setting",
        {"consumer": {"extraEnv": [{"name": "MONITOR_JUDGE_SERVER_USD_PER_HOURS", "value": "2"}]}},
        r"\(did you mean MONITOR_JUDGE_SERVER_USD_PER_HOUR\?\)",
    ),
]


@pytest.mark.parametrize(("values", "message"), [c[1:] for c in REFUSED], ids=[c[0] for c in REFUSED])
def test_a_configuration_the_monitor_would_refuse_fails_the_render(values: dict[str, Any], message: str) -> None:
    """A provider configuration the monitor would refuse at start fails the render with one message naming the
    value to set."""
    with pytest.raises(helm_python.HelmRenderError, match=message):
        render(values)


@pytest.mark.parametrize(
    "judge",
    [
        {"provider": "ollama"},
        {"baseUrl": "vllm:8000"},
        {"baseUrl": "https://user:key@litellm:4000/v1"},
        {"structuredOutput": "guided_json"},
        {"shadow": {"provider": "vllm"}},
    ],
)
def test_bad_provider_values_fail_the_schema(judge: dict[str, Any]) -> None:
    """An unknown provider or structured-output mode, or a base URL that is no http(s) URL or carries credentials,
    fails the values schema."""
    with pytest.raises(helm_python.HelmValuesError):
        render({"judge": judge})


def test_no_judge_key_is_ever_a_literal() -> None:
    """Across the providers, every judge key variable comes from a secretKeyRef, never a value or a ConfigMap key."""
    for judge in (VLLM, BEDROCK, VERTEX, {"shadow": {"method": "rubric", "model": "claude-sonnet-4-5"}}):
        docs = render({"judge": judge})
        for cm in of_kind(docs, "ConfigMap"):
            assert not KEY_ENV & set(cm.get("data", {})), cm["metadata"]["name"]
        for _, spec in pod_specs(docs):
            for c in spec["containers"]:
                for e in c["env"]:
                    if e["name"] in KEY_ENV:
                        assert set(e) == {"name", "valueFrom"} and "secretKeyRef" in e["valueFrom"], e
