"""The chart's defaults mean what they say: no made-up default image (an install names its image.repository), and a
setting name in extraSettings, alertEvaluator.extraSettings or consumer.extraEnv is checked when the chart renders,
against the list of settings the chart ships (files/settings.txt), which is the list monitor.config accepts.

Regenerate the list after adding a setting: `.venv/bin/python -m tests.helm.test_defaults > SETTINGS_FILE`."""

from __future__ import annotations

import re
import sys
from typing import Any

import helm_python
import pytest

from tests.helm.test_chart import CHART, IMAGE_REPOSITORY, _chart, one, real_settings, render

SETTINGS_FILE = CHART / "files" / "settings.txt"
HEADER = (
    "# Every setting relevancy-monitor accepts, one a line: the chart refuses any other name in extraSettings,\n"
    "# alertEvaluator.extraSettings and consumer.extraEnv. Generated: python -m tests.helm.test_defaults\n"
)


def settings_list() -> str:
    """The text files/settings.txt must hold: the header, then every setting of the code, sorted."""
    return HEADER + "".join(f"{name}\n" for name in sorted(real_settings()))


def shipped() -> list[str]:
    """The names in the shipped files/settings.txt (comment lines left out)."""
    lines = SETTINGS_FILE.read_text(encoding="utf-8").splitlines()
    return [line for line in lines if line and not line.startswith("#")]


def test_the_shipped_settings_list_is_the_codes() -> None:
    """files/settings.txt lists exactly the setting names the code accepts, sorted."""
    assert shipped() == sorted(real_settings()), "regenerate it: .venv/bin/python -m tests.helm.test_defaults"
    assert SETTINGS_FILE.read_text(encoding="utf-8") == settings_list()


def test_an_install_without_image_repository_fails_naming_it() -> None:
    """An install that does not set image.repository fails, naming it."""
    with pytest.raises(helm_python.HelmValuesError, match="repository"):
        render({}, required=False)
    with pytest.raises(helm_python.HelmValuesError, match="repository"):
        render({"image": {"repository": ""}}, required=False)


def test_the_image_is_the_repository_given() -> None:
    """image.repository, tag and digest make the image reference of every container."""
    digest = "sha256:" + "a" * 64
    docs = render({"image": {"repository": "registry.internal/rm", "tag": "0.1.1", "digest": digest}})
    container = one(docs, "Deployment", "-consumer")["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == f"registry.internal/rm:0.1.1@{digest}"
    job = one(render(), "Job", "-migrate")["spec"]["template"]["spec"]["containers"][0]
    assert job["image"] == f"{IMAGE_REPOSITORY}:{_chart().metadata['appVersion']}"


MISSPELT: list[tuple[dict[str, Any], str, str, str | None]] = [
    (
        {"extraSettings": {"MONITOR_SAMPLE_RATES": "0.2"}},
        "extraSettings",
        "MONITOR_SAMPLE_RATES",
        "MONITOR_SAMPLE_RATE",
    ),
    ({"extraSettings": {"MONITOR_CLUSTER": "prod"}}, "extraSettings", "MONITOR_CLUSTER", "MONITOR_CLICKHOUSE_CLUSTER"),
    (
        {"alertEvaluator": {"extraSettings": {"ALERTS_NOTIFY_TIMEOUT": "10"}}},
        "alertEvaluator.extraSettings",
        "ALERTS_NOTIFY_TIMEOUT",
        "ALERTS_NOTIFY_TIMEOUT_S",
    ),
    (
        {"consumer": {"extraEnv": [{"name": "MONITOR_JUDGE_TIMEOUT", "value": "90"}]}},
        "consumer.extraEnv",
        "MONITOR_JUDGE_TIMEOUT",
        "MONITOR_JUDGE_TIMEOUT_S",
    ),
    ({"extraSettings": {"MONITOR_ZZZZ": "1"}}, "extraSettings", "MONITOR_ZZZZ", None),
]


@pytest.mark.parametrize(("values", "where", "name", "hint"), MISSPELT, ids=[case[2] for case in MISSPELT])
def test_a_misspelt_setting_fails_the_render_naming_it(
    values: dict[str, Any], where: str, name: str, hint: str | None
) -> None:
    """A misspelt setting name fails the render naming it, where it was given, and the closest setting."""
    with pytest.raises(helm_python.HelmRenderError) as failed:
        render(values)
    message = str(failed.value)
    assert f"{where}: {name} is not a setting of relevancy-monitor" in message, message
    if hint:
        assert f"(did you mean {hint}?)" in message, message
    else:
        assert "did you mean" not in message, message


@pytest.mark.parametrize(
    "name", ["MONITOR_CLICKHOUSE_DATABASE", "MONITOR_CLICKHOUSE_URL", "MONITOR_LOG_LEVEL", "MONITOR_KAFKA_TOPICS"]
)
def test_a_setting_the_chart_sets_itself_is_refused_in_extra_settings(name: str) -> None:
    """A setting the pods get from a chart value fails in extraSettings instead of being overridden in some pods."""
    with pytest.raises(helm_python.HelmRenderError, match=f"extraSettings: {name} has its own value in this chart"):
        render({"extraSettings": {name: "x"}})


def test_every_real_setting_renders() -> None:
    """Every real setting that is neither secret nor chart-owned renders in extraSettings (or the evaluator's)."""
    owned = {"MONITOR_REDACT", "MONITOR_STORE_TEXT", "MONITOR_RETENTION_DAYS", "MONITOR_TEXT_RETENTION_DAYS"}
    owned |= {"MONITOR_JUDGE", "MONITOR_AUTO_MIGRATE", "MONITOR_LOG_FORMAT", "MONITOR_LOG_LEVEL"}
    owned |= {f"MONITOR_CLICKHOUSE_{n}" for n in ("URL", "DATABASE", "TABLE", "USER", "CA_FILE")}
    owned |= {f"MONITOR_JUDGE_{n}" for n in ("PROVIDER", "BASE_URL", "REGION", "PROJECT", "STRUCTURED_OUTPUT")}
    owned |= {"MONITOR_SHADOW_JUDGE_PROVIDER", "MONITOR_SHADOW_JUDGE_BASE_URL"}  # judge.*, even when not written
    owned |= set(one(render(), "ConfigMap", "-settings")["data"])  # written from the chart's own values
    names = [n for n in shipped() if not re.search("PASSWORD|API_KEY", n) and n not in owned]
    monitor = {n: "x" for n in names if n.startswith("MONITOR_")}
    alerts = {n: "x" for n in names if n.startswith("ALERTS_")}
    data = one(
        render({"extraSettings": monitor, "alertEvaluator": {"extraSettings": alerts}}), "ConfigMap", "-settings"
    )
    assert monitor.keys() <= data["data"].keys()


if __name__ == "__main__":
    sys.stdout.write(settings_list())
