"""The alert evaluator's canary in the chart: with it on (the default) the evaluator judges with the consumer's judge
settings and API key Secret, restarts when they change, and mounts a labels ConfigMap when one is named; off, it
gets no judge settings at all and says so to the evaluator."""

from __future__ import annotations

from typing import Any

import helm_python
import pytest

from tests.helm.test_chart import one, render, settings_of

JUDGE_SETTINGS = ("MONITOR_JUDGE", "MONITOR_JUDGE_MODEL", "MONITOR_JUDGE_CONCURRENCY", "MONITOR_REDACT")


def evaluator(docs: list[dict[str, Any]]) -> dict[str, Any]:
    """The evaluator's pod template."""
    return dict(one(docs, "Deployment", "-alert-evaluator")["spec"]["template"])


def secret_refs(pod: dict[str, Any]) -> dict[str, dict[str, str]]:
    """The env entries of the pod's container that come from a Secret, by name."""
    return {
        e["name"]: e["valueFrom"]["secretKeyRef"]
        for e in pod["spec"]["containers"][0]["env"]
        if "valueFrom" in e and "secretKeyRef" in e["valueFrom"]
    }


def test_the_canary_is_on_by_default_with_the_consumers_judge() -> None:
    """By default the evaluator's canary gets the consumer's judge settings, API key Secret and settings checksum."""
    docs = render(
        {
            "judge": {"requestsPerMinute": 300},
            "extraSettings": {"MONITOR_JUDGE_TIMEOUT_S": "90", "MONITOR_SAMPLE_RATE": "0.5"},
        }
    )
    env, consumer = settings_of(docs, "alert-evaluator"), settings_of(docs, "consumer")
    assert env["ALERTS_CANARY_INTERVAL"] == "1h" and "ALERTS_CANARY_FILE" not in env
    for name in (*JUDGE_SETTINGS, "MONITOR_JUDGE_REQUESTS_PER_MINUTE", "MONITOR_JUDGE_TIMEOUT_S"):
        assert env[name] == consumer[name], name
    assert "MONITOR_SAMPLE_RATE" not in env  # only what the judge's identity and limits depend on
    pod = evaluator(docs)
    assert (
        secret_refs(pod)["MONITOR_ANTHROPIC_API_KEY"]
        == secret_refs(one(docs, "Deployment", "-consumer")["spec"]["template"])["MONITOR_ANTHROPIC_API_KEY"]
    )
    consumer_checksum = one(docs, "Deployment", "-consumer")["spec"]["template"]["metadata"]["annotations"][
        "checksum/settings"
    ]
    assert pod["metadata"]["annotations"]["checksum/settings"] == consumer_checksum


@pytest.mark.parametrize("off", ["off", "0", False])
def test_off_gives_the_evaluator_no_judge(off: object) -> None:
    """Interval off ("off", "0" or YAML's bare off) sets ALERTS_CANARY_INTERVAL=off and passes no judge setting or
    key."""
    docs = render({"alertEvaluator": {"canary": {"interval": off}}})
    env = settings_of(docs, "alert-evaluator")
    assert env["ALERTS_CANARY_INTERVAL"] == "off" and not set(JUDGE_SETTINGS) & set(env)
    pod = evaluator(docs)
    assert (
        "MONITOR_ANTHROPIC_API_KEY" not in secret_refs(pod)
        and "checksum/settings" not in pod["metadata"]["annotations"]
    )


def test_a_labels_config_map_is_mounted_and_named_by_alerts_canary_file() -> None:
    """`canary.labels.configMap` is mounted read-only and named by ALERTS_CANARY_FILE; a lexical judge needs no API
    key."""
    docs = render(
        {
            "judge": {"method": "lexical"},
            "alertEvaluator": {"canary": {"labels": {"configMap": "my-labels", "key": "set.jsonl"}}},
        }
    )
    pod = evaluator(docs)
    volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
    assert volumes["canary-labels"]["configMap"] == {"name": "my-labels"}
    [mount] = [m for m in pod["spec"]["containers"][0]["volumeMounts"] if m["name"] == "canary-labels"]
    assert mount["readOnly"] is True
    assert settings_of(docs, "alert-evaluator")["ALERTS_CANARY_FILE"] == f"{mount['mountPath']}/set.jsonl"
    assert "MONITOR_ANTHROPIC_API_KEY" not in secret_refs(pod)


@pytest.mark.parametrize(
    "values", [{"interval": "hourly"}, {"interval": "1h", "labels": {"configMap": "Not_A_Name"}}, {"enabled": True}]
)
def test_bad_canary_values_fail_the_schema(values: dict[str, Any]) -> None:
    """An interval that is not a duration, a ConfigMap name that is not a DNS name, or an unknown key fails the
    render."""
    with pytest.raises(helm_python.HelmValuesError):
        render({"alertEvaluator": {"canary": values}})
