"""Every malformed MONITOR_* and ALERTS_* setting is a one-line error naming its environment variable (issue 10,
item 8): one malformed value per field of `Settings` and `AlertSettings`, cross-field checks, and a few runs of the
console script (exit 2, a single stderr line)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from monitor.alerts.settings import AlertSettings, load_alert_settings
from monitor.config import FIELDS, load_settings
from monitor.runtime.service import build_sampler
from schemas.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]

# A value each setting must refuse. A new setting fails `test_every_setting_is_covered` until it is added here or
# to FREE_FORM.
MALFORMED: dict[str, str] = {
    "kafka_bootstrap_servers": "broker:notaport",
    "kafka_topics": " , ",
    "kafka_group_id": "",
    "input_format": "otlp",
    "otlp_app_attribute": "",
    "otlp_prompt_version_attributes": " , ",
    "otlp_join_wait_s": "0",
    "otlp_join_max_waiting": "0",
    "publish_evaluations": "otlp_grpc",
    "publish_endpoint": "collector:4318",
    "publish_topic": "",
    "publish_encoding": "json",
    "publish_relevant_at": "1.5",
    "publish_queue_max": "0",
    "kafka_auto_offset_reset": "sometimes",
    "kafka_security_protocol": "TLS",
    "kafka_sasl_mechanism": "GSSAPI",
    "kafka_ssl_cafile": "/nonexistent/ca.pem",
    "kafka_ssl_certfile": "/nonexistent/client.pem",
    "kafka_ssl_keyfile": "/nonexistent/client.key",
    "kafka_ssl_check_hostname": "perhaps",
    "kafka_session_timeout_ms": "10s",
    "kafka_max_poll_records": "0",
    "kafka_connect_timeout_s": "0",
    "max_future_skew_s": "-5",
    "dlq_topic": "",
    "dlq_create": "sometimes",
    "dlq_partitions": "0",
    "dlq_replication_factor": "0",
    "max_event_bytes": "10",
    "clickhouse_url": "postgres://ch:5432",
    "clickhouse_database": "a-b",
    "clickhouse_table": "scores;drop",
    "clickhouse_user": "",
    "clickhouse_ca_file": "/nonexistent/ca.pem",
    "clickhouse_verify": "maybe",
    "clickhouse_cluster": "my cluster",
    "auto_migrate": "sometimes",
    "store_text": "true",
    "retention_days": "-1",
    "text_retention_days": "forever",
    "redact": "perhaps",
    "redact_patterns": '{"ORDER_REF": "ORD-[0-9"}',
    "redact_allow": '["unterminated"',
    "redact_phone_regions": "US,XX",
    "judge": "gpt",
    "judge_concurrency": "0",
    "judge_timeout_s": "-1",
    "judge_concurrency_floor": "0",
    "judge_requests_per_minute": "0",
    "judge_tokens_per_minute": "lots",
    "judge_event_attempts": "11",
    "breaker_threshold": "0",
    "breaker_cooldown_s": "0",
    "breaker_max_cooldown_s": "-5",
    "judge_model": "",
    "judge_provider": "mistral",
    "judge_base_url": "vllm:8000/v1",
    "judge_region": "",
    "judge_project": "",
    "judge_structured_output": "xml",
    "judge_score": "median",
    "judge_server_usd_per_hour": "-1",
    "judge_server_calls_per_hour": "0",
    "anthropic_base_url": "api.example.com",
    "judge_request_timeout_s": "0",
    "judge_max_retries": "11",
    "judge_max_tokens": "1",
    "judge_max_input_chars": "10",
    "judge_context_turns": "-1",
    "judge_context_max_chars": "10",
    "judge_context_system": "sometimes",
    "statements_strict_threshold": "1.5",
    "judge_prices": "{not json",
    "shadow_judge": "gpt",
    "shadow_judge_model": "",
    "shadow_judge_provider": "mistral",
    "shadow_judge_base_url": "ollama:11434",
    "shadow_sample_rate": "1.5",
    "sample_rate": "2",
    "sample_key": "user_id",
    "sampling_file": "/nonexistent/sampling.yaml",
    "budget_usd_per_hour": "0",
    "budget_usd_per_day": "-1",
    "budget_requests_per_hour": "x",
    "budget_requests_per_day": "0",
    "budget_tokens_per_hour": "0",
    "budget_tokens_per_day": "0",
    "budget_soft_limit": "1.5",
    "budget_sync_s": "0",
    "freshness_max_lag": "0",
    "lag_check_s": "0",
    "freshness_min_factor": "0",
    "cache_max_entries": "-1",
    "cache_ttl_s": "0",
    "traffic_flush_s": "0",
    "replay_confirm_usd": "-1",
    "max_in_flight": "1",
    "resume_in_flight": "-1",
    "batch_max_rows": "0",
    "batch_max_seconds": "0",
    "commit_interval_s": "0",
    "shutdown_grace_s": "-1",
    "progress_log_s": "0",
    "metrics_port": "70000",
    "store_unready_after_s": "0",
    "metrics_max_apps": "0",
    "log_format": "xml",
    "log_level": "trace",
    "review_routes": "/nonexistent/routes.yaml",
    "feedback_rating_scale": "1",
    "feedback_negative_rating_at_most": "1.5",
    "feedback_judge_budget": "-1",
    "feedback_lookback_s": "0",
    "feedback_read_max_records": "10",
    "feedback_resolve_wait_s": "-1",
}
ALERTS_MALFORMED: dict[str, str] = {
    "rules": "/nonexistent/rules.yaml",
    "traffic_table": "a-b",
    "interval": "soon",
    "webhook_url": "hooks.example.com/x",
    "slack_webhook_url": "ftp://slack",
    "alertmanager_url": "alertmanager:9093",
    "generator_url": "grafana/d/relevancy",
    "notify_timeout_s": "abc",
    "metrics_port": "-1",
    "canary_interval": "hourly",
    "canary_file": "/nonexistent/labels.jsonl",
    "ui_url": "ui.example.com/relevancy",
}
# Settings that accept any string: names and secrets have no format to check here (a wrong one is refused by the
# server that receives it: Kafka's SASL, the Messages API, the alert lease table).
FREE_FORM = frozenset(
    {
        "kafka_sasl_username",
        "kafka_sasl_password",
        "anthropic_api_key",
        "judge_api_key",
        "openai_api_key",
        "azure_openai_api_key",
        "shadow_judge_api_key",
        "metrics_apps",
        "clickhouse_password",
        "otlp_logs_topics",  # none is a choice: no OTLP topic carries log records
        "feedback_topics",  # none is a choice: no feedback is read
        "feedback_thumbs_evaluations",  # any evaluation names (none: no OpenTelemetry thumbs)
        "feedback_rating_evaluations",
    }
)
ALERTS_FREE_FORM = frozenset({"replica_id"})


def _sampler() -> object:
    # MONITOR_SAMPLING_FILE is read by `run` (the command that uses it), not by every command loading settings.
    return build_sampler(load_settings())


# The loader a command runs for a setting; `load_settings` unless the setting is read later by its command.
LOADER: dict[str, Callable[[], object]] = {"sampling_file": _sampler}


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for k in list(os.environ):
        if k.startswith(("MONITOR_", "ALERTS_", "ANTHROPIC_")):
            monkeypatch.delenv(k)


def _one_line_error(load: Callable[[], object]) -> str:
    with pytest.raises(ConfigError) as info:
        load()
    msg = str(info.value)
    assert "\n" not in msg, msg
    return msg


def test_every_setting_is_covered() -> None:
    """Each field of both models has a malformed value below or is listed as free-form (and not both)."""
    assert set(MALFORMED) | FREE_FORM == set(FIELDS) and not set(MALFORMED) & FREE_FORM
    assert (
        set(ALERTS_MALFORMED) | ALERTS_FREE_FORM == set(AlertSettings.model_fields)
        and not set(ALERTS_MALFORMED) & ALERTS_FREE_FORM
    )


@pytest.mark.parametrize("name", sorted(MALFORMED))  # every field but the free-form ones (see the coverage test)
def test_a_malformed_monitor_setting_names_its_variable(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    """MONITOR_<NAME> set to a malformed value is a one-line ConfigError starting `invalid setting MONITOR_<NAME>:`."""
    var = f"MONITOR_{name.upper()}"
    monkeypatch.setenv(var, MALFORMED[name])
    msg = _one_line_error(LOADER.get(name, load_settings))
    assert msg.startswith(f"invalid setting {var}: "), msg


@pytest.mark.parametrize("name", sorted(ALERTS_MALFORMED))
def test_a_malformed_alerts_setting_names_its_variable(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    """ALERTS_<NAME> set to a malformed value is a one-line ConfigError starting `invalid setting ALERTS_<NAME>:`."""
    var = f"ALERTS_{name.upper()}"
    monkeypatch.setenv(var, ALERTS_MALFORMED[name])
    msg = _one_line_error(load_alert_settings)
    assert msg.startswith(f"invalid setting {var}: "), msg


@pytest.mark.parametrize(
    ("env", "var", "also"),
    [
        (
            {"MONITOR_JUDGE_CONCURRENCY": "2", "MONITOR_JUDGE_CONCURRENCY_FLOOR": "3"},
            "MONITOR_JUDGE_CONCURRENCY_FLOOR",
            "MONITOR_JUDGE_CONCURRENCY",
        ),
        (
            {"MONITOR_MAX_IN_FLIGHT": "10", "MONITOR_RESUME_IN_FLIGHT": "10"},
            "MONITOR_RESUME_IN_FLIGHT",
            "MONITOR_MAX_IN_FLIGHT",
        ),
        ({"MONITOR_KAFKA_TOPICS": "a,b", "MONITOR_DLQ_TOPIC": "b"}, "MONITOR_DLQ_TOPIC", "MONITOR_KAFKA_TOPICS"),
        ({"ANTHROPIC_BASE_URL": "localhost:8080"}, "ANTHROPIC_BASE_URL", "http"),
        ({"MONITOR_JUDGE_PRICES": '{"m": {"input": "cheap"}}'}, "MONITOR_JUDGE_PRICES", "valid number"),
        ({"MONITOR_KAFKA_SSL_KEYFILE": __file__}, "MONITOR_KAFKA_SSL_KEYFILE", "MONITOR_KAFKA_SSL_CERTFILE"),
        (
            {"MONITOR_RETENTION_DAYS": "30", "MONITOR_TEXT_RETENTION_DAYS": "90"},
            "MONITOR_TEXT_RETENTION_DAYS",
            "MONITOR_RETENTION_DAYS",
        ),
        ({"MONITOR_TEXT_RETENTION_DAYS": "7"}, "MONITOR_TEXT_RETENTION_DAYS", "needs MONITOR_RETENTION_DAYS"),
        ({"MONITOR_REDACT_PATTERNS": '{"order_ref": "ORD-[0-9]+"}'}, "MONITOR_REDACT_PATTERNS", "upper case"),
        ({"MONITOR_REDACT_PATTERNS": '{"ANY": ".*"}'}, "MONITOR_REDACT_PATTERNS", "empty text"),
        ({"MONITOR_REDACT_PATTERNS": '{"WORD": "[A-Z]+"}'}, "MONITOR_REDACT_PATTERNS", "placeholder"),
        ({"MONITOR_STORE_TEXT": "false"}, "MONITOR_STORE_TEXT", "redacted, none or full"),
    ],
)
def test_cross_field_and_alias_errors_name_the_variable(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], var: str, also: str
) -> None:
    """A cross-field check names the variable at fault and the one it depends on; an alias error names the alias set."""
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    msg = _one_line_error(load_settings)
    assert msg.startswith(f"invalid setting {var}: ") and also in msg, msg


def test_a_broker_without_its_port_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """`localhost` alone is refused with the form it needs, not left to the client's default port."""
    monkeypatch.setenv("MONITOR_KAFKA_BOOTSTRAP_SERVERS", "kafka-1:9092,localhost")
    msg = _one_line_error(load_settings)
    assert "MONITOR_KAFKA_BOOTSTRAP_SERVERS" in msg and "'localhost' has no port (e.g. localhost:9092)" in msg, msg


def test_well_formed_values_pass_the_format_checks(monkeypatch: pytest.MonkeyPatch) -> None:
    """The URL and host:port checks accept the usual forms: several brokers, an IPv6 address, https URLs."""
    monkeypatch.setenv("MONITOR_KAFKA_BOOTSTRAP_SERVERS", "kafka-1:9092, kafka-2:9093,[::1]:9094")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "https://api.example.com")
    monkeypatch.setenv("MONITOR_CLICKHOUSE_URL", "https://user:pw@ch.example:8443")
    s = load_settings()
    assert (s.judge.base_url, s.store.url) == ("https://api.example.com", "https://user:pw@ch.example:8443")
    monkeypatch.setenv("ALERTS_WEBHOOK_URL", "http://hooks.local/x")
    a = load_alert_settings(alertmanager_url="https://am.example", generator_url="https://grafana/d/x")
    assert (a.webhook_url, a.generator_url, a.slack_webhook_url) == (
        "http://hooks.local/x",
        "https://grafana/d/x",
        None,
    )


def _cli(*args: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("MONITOR_", "ALERTS_", "ANTHROPIC_"))}
    return subprocess.run(
        [sys.executable, "-m", "monitor.cli.main", *args],
        env={**base, **env},
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize(
    ("args", "env", "var"),
    [
        (
            ("sql", "SELECT 1"),
            {"MONITOR_JUDGE_PRICES": "{not json"},
            "MONITOR_JUDGE_PRICES",
        ),  # was a SettingsError traceback
        (
            ("run",),
            {"MONITOR_CLICKHOUSE_URL": "postgres://ch"},
            "MONITOR_CLICKHOUSE_URL",
        ),  # was "invalid settings: clickhouse_url ..."
        (("run",), {"MONITOR_KAFKA_TOPICS": "a", "MONITOR_DLQ_TOPIC": "a"}, "MONITOR_DLQ_TOPIC"),
        (
            ("run",),
            {"MONITOR_KAFKA_SECURITY_PROTOCOL": "SASL_SSL", "MONITOR_KAFKA_SASL_MECHANISM": "SCRAM-SHA-512"},
            "MONITOR_KAFKA_SASL_MECHANISM",
        ),
        (("run",), {"MONITOR_KAFKA_SSL_CAFILE": "/nonexistent/ca.pem"}, "MONITOR_KAFKA_SSL_CAFILE"),
        (("alerts", "check"), {"ALERTS_RULES": "/nonexistent/rules.yaml"}, "ALERTS_RULES"),
        (
            ("alerts", "run", "--once", "--no-lease"),
            {"ALERTS_ALERTMANAGER_URL": "alertmanager:9093"},
            "ALERTS_ALERTMANAGER_URL",
        ),
    ],
)
def test_the_console_script_exits_2_with_one_line_naming_the_variable(
    tmp_path: Path, args: tuple[str, ...], env: dict[str, str], var: str
) -> None:
    """Through the real entry point a malformed setting exits 2 with a single stderr line naming its variable."""
    done = _cli(*args, env=env, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and done.stderr.startswith(
        f"relevancy-monitor: error: invalid setting {var}: "
    ), done.stderr
    assert not any(tmp_path.iterdir())  # refused before any store was opened or created
