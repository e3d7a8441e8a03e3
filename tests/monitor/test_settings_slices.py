"""Settings slices and the ALERTS_* settings: each component gets a typed slice; alert settings are validated
only by the commands that use them, with one-line errors naming the variable."""

from __future__ import annotations

import os
import subprocess
import sys
import typing
from pathlib import Path
from typing import Any

import pytest
from pydantic import HttpUrl
from pydantic_settings import BaseSettings

from consumers.settings import KafkaSettings, SamplingSettings
from monitor.alerts.settings import AlertSettings, load_alert_settings
from monitor.config import SETTINGS, Settings, load_settings
from monitor.judges.settings import JudgeSettings
from monitor.judging.settings import ShadowSettings
from monitor.store.settings import StoreSettings
from schemas.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for k in list(os.environ):
        if k.startswith(("MONITOR_", "ALERTS_", "ANTHROPIC_")):
            monkeypatch.delenv(k)


# Where each MONITOR_* setting goes. A new setting must be added here (and to a slice), or no component sees it.
SLICE_OF: dict[str, str] = {
    **{
        f"kafka_{n}": f"kafka.{n}"
        for n in (
            "bootstrap_servers",
            "topics",
            "group_id",
            "auto_offset_reset",
            "security_protocol",
            "sasl_mechanism",
            "sasl_username",
            "sasl_password",
            "ssl_cafile",
            "ssl_certfile",
            "ssl_keyfile",
            "ssl_check_hostname",
            "session_timeout_ms",
            "max_poll_records",
        )
    },
    "dlq_topic": "kafka.dlq_topic",
    "dlq_create": "kafka.dlq_create",
    "dlq_partitions": "kafka.dlq_partitions",
    "dlq_replication_factor": "kafka.dlq_replication_factor",
    "max_event_bytes": "kafka.max_event_bytes",
    "kafka_connect_timeout_s": "kafka.connect_timeout_s",
    "max_future_skew_s": "kafka.max_future_skew_s",
    "input_format": "kafka.input_format",
    "otlp_logs_topics": "kafka.otlp_logs_topics",
    "otlp_app_attribute": "kafka.otlp_app_attribute",
    "otlp_prompt_version_attributes": "kafka.otlp_prompt_version_attributes",
    "otlp_join_wait_s": "kafka.otlp_join_wait_s",
    "otlp_join_max_waiting": "kafka.otlp_join_max_waiting",
    "publish_evaluations": "publish.publish_evaluations",
    "publish_endpoint": "publish.publish_endpoint",
    "publish_topic": "publish.publish_topic",
    "publish_encoding": "publish.publish_encoding",
    "publish_relevant_at": "publish.publish_relevant_at",
    "publish_queue_max": "publish.publish_queue_max",
    "clickhouse_url": "store.url",
    "clickhouse_database": "store.database",
    "clickhouse_table": "store.table",
    "store_text": "store.store_text",
    "retention_days": "store.retention_days",
    "text_retention_days": "store.text_retention_days",
    "redact_patterns": "redaction.patterns",
    "redact_allow": "redaction.allow",
    "redact_phone_regions": "redaction.phone_regions",
    "clickhouse_user": "store.user",
    "clickhouse_password": "store.password",
    "clickhouse_ca_file": "store.ca_file",
    "clickhouse_verify": "store.verify",
    "clickhouse_cluster": "store.cluster",
    "auto_migrate": "store.auto_migrate",
    "redact": "redaction.redact",
    "judge": "judge.method",
    "judge_model": "judge.model",
    "anthropic_api_key": "judge.api_key",
    "anthropic_base_url": "judge.base_url",
    "judge_provider": "judge.provider",
    "judge_base_url": "judge.judge_base_url",
    "judge_api_key": "judge.judge_api_key",
    "openai_api_key": "judge.openai_api_key",
    "azure_openai_api_key": "judge.azure_openai_api_key",
    "judge_region": "judge.region",
    "judge_project": "judge.project",
    "judge_structured_output": "judge.structured_output",
    "judge_score": "judge.score",
    "judge_server_usd_per_hour": "judge.server_usd_per_hour",
    "judge_server_calls_per_hour": "judge.server_calls_per_hour",
    "judge_request_timeout_s": "judge.request_timeout_s",
    "judge_max_retries": "judge.max_retries",
    "judge_max_tokens": "judge.max_tokens",
    "judge_max_input_chars": "judge.max_input_chars",
    "judge_context_turns": "judge.context_turns",
    "judge_context_max_chars": "judge.context_max_chars",
    "judge_context_system": "judge.context_system",
    "statements_strict_threshold": "judge.statements_strict_threshold",
    "judge_prices": "judge.prices",
    "shadow_judge": "shadow.method",
    "shadow_judge_model": "shadow.model",
    "shadow_judge_provider": "shadow.provider",
    "shadow_judge_base_url": "shadow.base_url",
    "shadow_judge_api_key": "shadow.api_key",
    "shadow_sample_rate": "shadow.sample_rate",
    **{
        n: f"flow.{n}"
        for n in (
            "judge_concurrency",
            "judge_concurrency_floor",
            "judge_requests_per_minute",
            "judge_tokens_per_minute",
            "judge_timeout_s",
            "judge_event_attempts",
            "breaker_threshold",
            "breaker_cooldown_s",
            "breaker_max_cooldown_s",
            "max_in_flight",
            "resume_in_flight",
            "batch_max_rows",
            "batch_max_seconds",
            "commit_interval_s",
            "shutdown_grace_s",
            "lag_check_s",
            "progress_log_s",
        )
    },
    "sample_rate": "sampling.rate",
    "sample_key": "sampling.key",
    "sampling_file": "sampling.file",
    **{
        f"budget_{n}": f"budget.{n}"
        for n in (
            "usd_per_hour",
            "usd_per_day",
            "requests_per_hour",
            "requests_per_day",
            "tokens_per_hour",
            "tokens_per_day",
            "soft_limit",
            "sync_s",
        )
    },
    **{
        n: f"budget.{n}"
        for n in ("freshness_max_lag", "freshness_min_factor", "cache_max_entries", "cache_ttl_s", "traffic_flush_s")
    },
    # Read by the process or one command itself, not by a component.
    **{
        n: f"process.{n}"
        for n in (
            "metrics_port",
            "metrics_max_apps",
            "metrics_apps",
            "log_format",
            "log_level",
            "replay_confirm_usd",
            "store_unready_after_s",
        )
    },
    "review_routes": "review.routes",
    **{
        n: f"feedback.{a}"
        for n, a in (
            ("feedback_topics", "topics"),
            ("feedback_thumbs_evaluations", "thumbs_evaluations"),
            ("feedback_rating_evaluations", "rating_evaluations"),
            ("feedback_rating_scale", "rating_scale"),
            ("feedback_negative_rating_at_most", "negative_rating_at_most"),
            ("feedback_judge_budget", "judge_budget"),
            ("feedback_lookback_s", "lookback_s"),
            ("feedback_read_max_records", "read_max_records"),
            ("feedback_resolve_wait_s", "resolve_wait_s"),
        )
    },
}

# A value for many settings, each other than its default, as a caller would pass it (secrets as plain strings).
GIVEN: dict[str, Any] = {
    "kafka_sasl_mechanism": "PLAIN",
    "kafka_sasl_username": "u",
    "kafka_sasl_password": "pw",
    "anthropic_api_key": "k",
    "kafka_session_timeout_ms": 7000,
    "kafka_topics": ("t1", "t2"),
    "judge_max_tokens": 333,
    "judge_context_turns": 3,
    "judge_context_max_chars": 1234,
    "judge_context_system": False,
    "sample_rate": 0.3,
    "budget_sync_s": 9.0,
    "batch_max_rows": 7,
    "clickhouse_table": "t2",
    "max_in_flight": 40,
    "resume_in_flight": 5,
    "budget_usd_per_day": 3.0,
    "kafka_ssl_cafile": Path(__file__),
    "kafka_ssl_certfile": Path(__file__),
    "kafka_ssl_keyfile": Path(__file__),
    "kafka_ssl_check_hostname": False,
    "dlq_create": False,
    "dlq_partitions": 6,
    "input_format": "t1=otlp_json,t2=events",
    "otlp_logs_topics": ("t1",),
    "otlp_app_attribute": "deployment.name",
    "otlp_prompt_version_attributes": ("my.prompt",),
    "otlp_join_wait_s": 12.5,
    "otlp_join_max_waiting": 77,
    "publish_evaluations": "kafka",
    "publish_endpoint": HttpUrl("https://collector.example:4318/v1/logs"),
    "publish_topic": "evals",
    "publish_encoding": "otlp_json",
    "publish_relevant_at": 0.7,
    "publish_queue_max": 50,
    "dlq_replication_factor": 2,
    "clickhouse_user": "ch-user",
    "clickhouse_password": "ch-pw",
    "clickhouse_ca_file": Path(__file__),
    "clickhouse_verify": False,
    "clickhouse_cluster": "c1",
    "auto_migrate": False,
    "store_text": "none",
    "retention_days": 30,
    "text_retention_days": 7,
    "redact": True,
    "redact_patterns": {"ORDER_REF": "ORD-[0-9]{6}"},
    "redact_allow": ("support@example.com",),
    "redact_phone_regions": ("US", "IN"),
    "shadow_judge": "statements",
    "shadow_judge_model": "claude-sonnet-5-5",
    "shadow_sample_rate": 0.2,
    "lag_check_s": 2.5,
    "metrics_port": 9200,
    "metrics_apps": ("shop",),
    "log_level": "debug",
    "replay_confirm_usd": 1.5,
    "feedback_topics": ("t1", "fb"),
    "feedback_rating_scale": 10,
    "feedback_judge_budget": 5,
}


def test_every_setting_reaches_its_slice_with_its_value() -> None:
    """Each MONITOR_* setting is carried by exactly the slice attribute named, and a value given reaches it."""
    assert set(SLICE_OF) == set(SETTINGS)
    s = load_settings(**GIVEN)
    for name, path in SLICE_OF.items():
        slice_name, attr = path.split(".")
        assert (SETTINGS[name].slice, SETTINGS[name].attr) == (slice_name, attr), name
        if name in GIVEN:
            got = getattr(getattr(s, slice_name), attr)
            assert (got.get_secret_value() if hasattr(got, "get_secret_value") else got) == GIVEN[name], name


def test_settings_has_no_field_but_its_slices() -> None:
    """`Settings` holds no copy of a setting: each of its fields is a slice, a pydantic-settings class of its own."""
    for name, field in Settings.model_fields.items():
        kinds = [t for t in (field.annotation, *typing.get_args(field.annotation)) if isinstance(t, type)]
        assert any(issubclass(t, BaseSettings) for t in kinds), name


def test_each_slice_reads_its_own_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    """A slice built alone reads its MONITOR_* variables, under the names they always had."""
    for var, value in {
        "MONITOR_KAFKA_TOPICS": "x, y",
        "MONITOR_DLQ_TOPIC": "dead",
        "MONITOR_CLICKHOUSE_TABLE": "t9",
        "MONITOR_JUDGE": "rubric",
        "MONITOR_JUDGE_MODEL": "m-1",
        "ANTHROPIC_API_KEY": "sk-sdk",
        "MONITOR_SHADOW_SAMPLE_RATE": "0.5",
        "MONITOR_SAMPLE_RATE": "0.25",
    }.items():
        monkeypatch.setenv(var, value)
    kafka, judge = KafkaSettings(), JudgeSettings()
    assert (kafka.topics, kafka.dlq_topic, StoreSettings().table) == (("x", "y"), "dead", "t9")
    assert (judge.method, judge.model, judge.api_key and judge.api_key.get_secret_value()) == (
        "rubric",
        "m-1",
        "sk-sdk",
    )
    assert (ShadowSettings().sample_rate, SamplingSettings().rate) == (0.5, 0.25)


def test_unprefixed_or_misnamed_variables_change_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """Variables without the MONITOR_ prefix (KAFKA_TOPICS, BOOTSTRAP_SERVERS) are not read, nor is MONITOR_SAMPLE_RATE
    by the shadow (whose field is also called sample_rate); MONITOR_<field> of an aliased field is refused."""
    for var in ("KAFKA_TOPICS", "BOOTSTRAP_SERVERS", "KAFKA_BOOTSTRAP_SERVERS", "DLQ_TOPIC", "JUDGE", "JUDGE_MODEL"):
        monkeypatch.setenv(var, "zz:1")
    monkeypatch.setenv("SHADOW_SAMPLE_RATE", "0.9")
    monkeypatch.setenv("MONITOR_SAMPLE_RATE", "0.5")
    s = load_settings()
    assert (s.kafka.topics, s.kafka.bootstrap_servers, s.kafka.dlq_topic) == (
        ("conversations",),
        "127.0.0.1:9092",
        "relevancy-monitor.dlq",
    )
    assert (s.judge.method, s.judge.model, s.shadow.sample_rate, s.sampling.rate) == (
        "lexical",
        "claude-haiku-5-5",
        0.05,
        0.5,
    )
    monkeypatch.setenv("MONITOR_BOOTSTRAP_SERVERS", "b:1")
    with pytest.raises(ConfigError, match="unknown setting MONITOR_BOOTSTRAP_SERVERS"):
        load_settings()


def test_a_flag_that_is_no_setting_is_a_type_error() -> None:
    """`load_settings` takes setting names only: a slice's own attribute name (`bootstrap_servers`) is refused."""
    with pytest.raises(TypeError, match="bootstrap_servers"):
        load_settings(bootstrap_servers="b:1")


def test_redaction_off_is_no_redaction_slice_and_no_redactor() -> None:
    """MONITOR_REDACT=false is read in one place: the redaction slice is None, and so is the redactor built from it."""
    from monitor.privacy.redactor import build_redactor

    off = load_settings(redact=False)
    assert off.redaction is None and build_redactor(off.redaction) is None
    assert build_redactor(load_settings().redaction) is not None


@pytest.mark.parametrize(
    ("url", "setting", "expected"),
    [
        ("chdb:///tmp/x", None, True),
        ("https://ch:8443", None, False),
        ("http://ch:8123", True, True),
        ("chdb:///tmp/x", False, False),
    ],
)
def test_auto_migrate_defaults_per_url_unless_set(url: str, setting: bool | None, expected: bool) -> None:
    """MONITOR_AUTO_MIGRATE unset means true for the embedded store and false for a server; set, it wins."""
    s = load_settings(clickhouse_url=url, auto_migrate=setting)
    assert s.store.auto_migrate is setting and s.store.auto_migrates is expected


def test_the_clickhouse_password_is_redacted() -> None:
    """MONITOR_CLICKHOUSE_PASSWORD never appears in the start-up settings log line."""
    out = load_settings(clickhouse_user="u", clickhouse_password="s3cret").redacted()
    assert out["clickhouse_password"] == "***" and "s3cret" not in str(out) and out["clickhouse_user"] == "u"


def test_resume_mark_is_derived_from_the_cap_when_unset() -> None:
    """Without MONITOR_RESUME_IN_FLIGHT consumption resumes at half the in-flight cap, and the field stays unset."""
    s = load_settings(max_in_flight=100)
    assert s.flow.resume_in_flight is None and s.flow.resume_at == 50


def test_alert_settings_come_from_alerts_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    """ALERTS_* variables fill the alert settings, flags override them, durations are parsed."""
    monkeypatch.setenv("ALERTS_NOTIFY_TIMEOUT_S", "2.5")  # through monkeypatch: a later test must not see them
    monkeypatch.setenv("ALERTS_INTERVAL", "30s")
    a = load_alert_settings(webhook_url="http://hook")
    assert (a.notify_timeout_s, a.interval.total_seconds(), a.webhook_url) == (2.5, 30.0, "http://hook")
    assert load_alert_settings(interval="5m").interval.total_seconds() == 300.0


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"ALERTS_NOTIFY_TIMEOUT_S": "abc"}, "invalid setting ALERTS_NOTIFY_TIMEOUT_S"),
        ({"ALERTS_METRICS_PORT": "-1"}, "invalid setting ALERTS_METRICS_PORT"),
        ({"ALERTS_INTERVAL": "soon"}, "invalid setting ALERTS_INTERVAL"),
        ({"ALERTS_TRAFFIC_TABLE": "a-b"}, "invalid setting ALERTS_TRAFFIC_TABLE"),
        ({"ALERTS_WEBHOOK": "http://x"}, "did you mean ALERTS_WEBHOOK_URL?"),
    ],
)
def test_a_bad_alert_setting_is_one_line_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], expected: str
) -> None:
    """A malformed or misspelt ALERTS_* variable is a ConfigError of one line that names it."""
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    with pytest.raises(ConfigError) as info:
        load_alert_settings()
    assert expected in str(info.value) and "\n" not in str(info.value)


def test_every_alert_setting_has_a_flag_of_the_alerts_commands() -> None:
    """Each AlertSettings field can be given on the command line of `alerts run`, and reaches the settings."""
    from monitor.cli.alerts import alert_settings
    from monitor.cli.main import build_parser

    ns = build_parser().parse_args(["alerts", "run", "--replica-id", "r-1", "--notify-timeout-s", "2.5"])
    assert {name for name in AlertSettings.model_fields if hasattr(ns, name)} == set(AlertSettings.model_fields)
    settings = alert_settings(ns)
    assert (settings.replica_id, settings.notify_timeout_s) == ("r-1", 2.5)


def _cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("MONITOR_", "ALERTS_"))}
    return subprocess.run(
        [sys.executable, "-m", "monitor.cli.main", *args],
        env={**base, **env},
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_malformed_alerts_variable_stops_only_the_alerts_commands(tmp_path: Path) -> None:
    """ALERTS_NOTIFY_TIMEOUT_S=abc leaves `run --help` working and makes `alerts run` exit 2 with one line."""
    env = {"ALERTS_NOTIFY_TIMEOUT_S": "abc", "MONITOR_CLICKHOUSE_URL": f"chdb://{tmp_path / 'chdb'}"}
    helped = _cli("run", "--help", env=env)
    assert helped.returncode == 0 and "Traceback" not in helped.stderr, helped.stderr
    failed = _cli("alerts", "run", "--once", "--no-lease", env=env)
    assert failed.returncode == 2, failed.stderr
    assert (
        failed.stderr.strip() == "relevancy-monitor: error: invalid setting ALERTS_NOTIFY_TIMEOUT_S: "
        "Input should be a valid number, unable to parse string as a number (got 'abc')"
    )
