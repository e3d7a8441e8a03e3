"""Settings from env and flags, and their one-line errors."""

from __future__ import annotations

import pytest

from monitor.cli.flags import settings_from_args
from monitor.cli.main import build_parser
from monitor.config import load_settings
from schemas.errors import ConfigError


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Remove every MONITOR_* and ANTHROPIC_* variable for each test."""
    import os

    for k in list(os.environ):
        if k.startswith(("MONITOR_", "ANTHROPIC_")):
            monkeypatch.delenv(k)


def test_env_values_and_csv_topics(monkeypatch: pytest.MonkeyPatch) -> None:
    """Env values are read, CSV topics are trimmed with blanks dropped, and resume defaults to half the cap."""
    monkeypatch.setenv("MONITOR_KAFKA_TOPICS", "a, b,,c")
    monkeypatch.setenv("MONITOR_SAMPLE_RATE", "0.25")
    monkeypatch.setenv("MONITOR_MAX_IN_FLIGHT", "100")
    s = load_settings()
    assert s.kafka.topics == ("a", "b", "c") and s.sampling.rate == 0.25
    assert s.flow.resume_at == 50


def test_flags_override_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Command-line flags override environment values."""
    monkeypatch.setenv("MONITOR_SAMPLE_RATE", "0.25")
    ns = build_parser().parse_args(["run", "--sample-rate", "0.5", "--store-text", "none", "--judge", "lexical"])
    s = settings_from_args(ns)
    assert s.sampling.rate == 0.5 and s.store.store_text == "none"


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"MONITOR_SAMPLE_RATE": "abc"}, "MONITOR_SAMPLE_RATE"),
        ({"MONITOR_JUDGE": "gpt"}, "MONITOR_JUDGE"),
        ({"MONITOR_CLICKHOUSE_URL": "postgres://x"}, "invalid setting MONITOR_CLICKHOUSE_URL"),
        ({"MONITOR_CLICKHOUSE_DATABASE": "a-b"}, "MONITOR_CLICKHOUSE_DATABASE"),
        ({"MONITOR_MAX_IN_FLIGHT": "10", "MONITOR_RESUME_IN_FLIGHT": "10"}, "invalid setting MONITOR_RESUME_IN_FLIGHT"),
        ({"MONITOR_SAMPLE_RAT": "0.1"}, "did you mean MONITOR_SAMPLE_RATE?"),
    ],
)
def test_errors_name_the_setting(monkeypatch: pytest.MonkeyPatch, env: dict[str, str], expected: str) -> None:
    """An invalid setting is a one-line ConfigError naming it, with a suggestion for a misspelt name."""
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    with pytest.raises(ConfigError) as info:
        load_settings()
    msg = str(info.value)
    assert expected in msg and "\n" not in msg


def test_secrets_are_redacted(monkeypatch: pytest.MonkeyPatch) -> None:
    """redacted() hides the API key and the URL password, which the settings still hold."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-secret")
    s = load_settings(judge="rubric", clickhouse_url="https://user:pw@ch.example:8443")
    red = s.redacted()
    assert s.judge.api_key is not None and s.judge.api_key.get_secret_value() == "sk-secret"
    assert "sk-secret" not in str(red) and "pw" not in red["clickhouse_url"]


def test_unpriced_model_is_allowed_and_prices_merge(monkeypatch: pytest.MonkeyPatch) -> None:
    """Prices from MONITOR_JUDGE_PRICES merge with the defaults and are per million tokens."""
    monkeypatch.setenv(
        "MONITOR_JUDGE_PRICES", '{"my-judge": {"input": 1, "output": 2, "cache_read": 0.1, "cache_write": 1.25}}'
    )
    s = load_settings()
    assert {"my-judge", "claude-haiku-5-5"} <= set(s.judge.prices)
    assert s.judge.prices["my-judge"].cost(1_000_000, 0, 0, 0) == 1.0


def test_every_setting_has_a_description() -> None:
    """Every MONITOR_* and ALERTS_* field says what it does: docs/configuration.md and `--help` show it."""
    from monitor.alerts.settings import AlertSettings
    from monitor.config import FIELDS

    for model, fields in (("Settings", FIELDS), ("AlertSettings", AlertSettings.model_fields)):
        for name, field in fields.items():
            assert field.description and field.description.strip(), f"{model}: {name} has no description"
