"""Shared fixtures: the real broker (tansu), the real store (chDB) and, below, the fake Messages API server.

chDB allows one engine path per process, so the whole session shares one path and each test gets its own
database in it."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from monitor.config import Settings, load_settings
from monitor.devtools.localbroker import LocalBroker
from monitor.store.async_store import AsyncStore
from monitor.store.connection import ClickHouseStore
from tests.fake_messages_api import FakeMessagesAPI
from tests.harness import create_topic
from tests.properties import load_profile
from tests.store_template import StoreTemplate

load_profile()  # hypothesis: `quick` unless HYPOTHESIS_PROFILE=thorough (see tests/properties.py)

EXAMPLES = Path(__file__).resolve().parent / "data"


@pytest.fixture(scope="session")
def broker() -> Iterator[LocalBroker]:
    """One tansu broker for the session, on a free port (in-memory; each test uses fresh topics)."""
    with LocalBroker() as b:
        yield b


@pytest.fixture(scope="session")
def chdb_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The session's single chDB path."""
    return tmp_path_factory.mktemp("chdb")


@pytest.fixture
def database() -> str:
    """A fresh database name for one test."""
    return f"t_{uuid.uuid4().hex[:12]}"


@pytest.fixture
def clickhouse_url(chdb_dir: Path) -> str:
    """The session's embedded ClickHouse URL."""
    return f"chdb://{chdb_dir}"


@pytest.fixture(scope="session")
def store_template(chdb_dir: Path) -> StoreTemplate:
    """The worker's migrated database, which each test's `store` copies (0.07 CPU-s, against 0.2-0.3 to migrate)."""
    return StoreTemplate.migrate(f"chdb://{chdb_dir}", f"tpl_{uuid.uuid4().hex[:12]}")


@pytest.fixture
def store(store_template: StoreTemplate, database: str) -> Iterator[ClickHouseStore]:
    """A synchronous store on a fresh database with the schema created; dropped afterwards."""
    s = store_template.copy(database)
    yield s
    # SYNC: an Atomic database keeps a dropped table for 8 minutes, and each one left slows every later DDL of the
    # worker's engine (a schema set-up costs 0.3 CPU-s on a fresh engine, 0.95 after 30 drops without SYNC).
    s.command(f"DROP DATABASE IF EXISTS {database} SYNC")


@pytest.fixture
async def async_store(store: ClickHouseStore) -> AsyncIterator[AsyncStore]:
    """The same store behind the async shell the pipeline uses (all calls on one thread)."""
    a = AsyncStore(ClickHouseStore(store.url, store.database, store.table))
    await a.open()
    yield a
    await a.close()


@pytest.fixture
async def topic(broker: LocalBroker) -> str:
    """A fresh input topic with 3 partitions."""
    name = f"conv-{uuid.uuid4().hex[:8]}"
    await create_topic(broker.bootstrap, name, partitions=3)
    return name


@pytest.fixture
def make_settings(broker: LocalBroker, clickhouse_url: str, database: str, topic: str) -> Callable[..., Settings]:
    """Settings pointing at the test broker, topic and database; keyword overrides win."""

    def make(**overrides: Any) -> Settings:
        base: dict[str, Any] = dict(
            kafka_bootstrap_servers=broker.bootstrap,
            kafka_topics=[topic],
            kafka_group_id=f"g-{topic}",
            dlq_topic=f"{topic}.dlq",
            clickhouse_url=clickhouse_url,
            clickhouse_database=database,
            judge="lexical",
            metrics_port=0,
            batch_max_seconds=0.2,
            commit_interval_s=0.2,
            shutdown_grace_s=10.0,
            kafka_session_timeout_ms=6000,
        )
        base.update(overrides)
        return load_settings(**base)

    return make


# ---- scheduling under pytest-xdist ----------------------------------------------------------------------------
# `make test` runs the suite with `-n 4 --dist loadgroup`: each worker takes the next test (or the next
# `xdist_group` of tests sharing a module fixture) when it is nearly free. These tests take longest (a subprocess
# service, a day of history, a benchmark, a wheel install); started first, they run beside each other and beside
# the many short tests instead of one of them ending the run alone. Longest first, by node id without parameters;
# a name missing here only costs time, never a check.
LONG_TESTS = (
    "monitor/runtime/test_scale_out_bench.py::test_the_scale_out_benchmark_runs_at_a_tiny_size",
    "monitor/store/test_embedded_reader.py::test_sql_during_a_live_run_sees_the_rows_grow",
    "consumers/test_decode_paths.py::test_both_paths_agree_on_arbitrary_events",
    "monitor/alerts/test_alert_quality_bench.py::test_a_tiny_run_pages_on_a_large_drop_and_prints_its_table",
    "deploy/test_image.py::test_image_install_step_on_a_clean_venv",
    "monitor/alerts/test_history.py::test_the_fast_backtest_finds_the_episodes_of_the_per_step_backtest",
    "monitor/alerts/test_history.py::test_history_gives_the_observations_and_states_of_one_query_per_step",
    "monitor/alerts/test_replays.py::test_replayed_rows_change_nothing_a_rule_leaving_them_out_sees",
    "consumers/test_decode_paths.py::test_both_paths_agree_on_plausible_events",
    "monitor/devtools/test_demo.py::test_the_demo_ends_with_exactly_the_planted_alert",
    "monitor/cli/test_replay.py::test_replay_shows_the_estimate_refuses_without_yes_and_stops_at_the_cap",
    "monitor/alerts/test_replays.py::test_a_rule_with_include_replays_reads_replayed_rows_as_live_ones",
    "monitor/canary/test_drift.py::test_a_judge_that_drifts_fires_its_canary_and_not_the_live_alerts",
    "monitor/devtools/test_demo.py::test_with_an_api_key_the_demo_judges_with_the_llm",
    "monitor/runtime/test_latency_bench.py::test_the_latency_benchmark_runs_at_a_tiny_size",
    "monitor/runtime/test_faults.py::test_sigkill_at_random_points_then_restart_loses_and_duplicates_nothing",
    "monitor/canary/test_drift.py::test_a_product_regression_fires_the_live_alerts_while_the_canaries_hold",
    "consumers/test_decode.py::test_arbitrary_json_objects_with_our_field_names_never_crash",
    "monitor/alerts/test_rollouts.py::test_new_versions_and_models_as_good_as_the_old_fire_nothing_over_two_noisy_days",
    "monitor/cli/test_forget.py::test_forget_prints_one_line_per_table_and_a_total",
    "monitor/cli/test_main.py::test_run_scores_events_from_another_process_and_sql_shows_them",
    "monitor/alerts/test_rollouts.py::test_a_new_version_as_good_as_the_old_fires_nothing_over_a_day",
    "monitor/cli/test_read_paths.py::test_migrate_creates_the_store_the_read_paths_then_open",
    "monitor/store/test_read_only_store.py::test_sql_refuses_every_write_through_a_running_monitor",
    "monitor/cli/test_read_paths.py::test_alerts_check_and_backtest_run_for_a_read_only_user_without_a_judge_key",
    "monitor/runtime/test_broker_loss.py::test_a_stop_while_the_broker_is_away_exits_cleanly",
    "monitor/store/test_schema_repair.py::test_run_refuses_a_store_missing_a_table_before_any_kafka_client",
    "monitor/cli/test_forget.py::test_forget_json_is_an_audit_record_and_a_dry_run_deletes_nothing",
    "monitor/cli/test_alerts.py::test_run_logs_one_structured_line_per_round",
    "monitor/runtime/test_memory_backlog_bench.py::test_the_memory_benchmark_runs_at_a_tiny_size",
    "monitor/alerts/test_rollouts.py::test_a_judge_change_fires_nothing",
    "monitor/runtime/test_broker_loss.py::test_readiness_transitions_against_a_broker_lost_mid_run",
    "monitor/canary/test_cli.py::test_off_runs_no_canary_and_a_labels_file_of_your_own_is_its_own_history",
    "monitor/cli/test_main.py::test_produce_generates_personal_data_on_request_and_refuses_a_bad_share",
    "monitor/cli/test_main.py::test_sql_errors_are_one_line",
    "monitor/runtime/test_broker_loss.py::test_a_lost_broker_is_reported_once_shown_in_readiness_and_nothing_is_lost",
    "monitor/alerts/test_rollouts.py::test_the_demo_regression_fires_through_the_default_rules_on_v13_and_never_on_v12",
    "monitor/runtime/test_pipeline_throughput_bench.py::test_the_throughput_benchmark_runs_at_a_tiny_size",
    "monitor/cli/test_broker.py::test_a_second_broker_on_a_taken_port_is_a_one_line_error",
    "monitor/runtime/test_redaction_e2e.py::test_a_known_api_key_never_appears_in_any_log_line_of_a_full_run",
    "monitor/cli/test_alerts.py::test_subprocess_check_on_a_fresh_store_and_a_bad_rules_file",
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under xdist, the long tests first (in LONG_TESTS order), then the rest in collection order."""
    if not hasattr(config, "workerinput"):  # serial: keep pytest's order, which groups module fixtures
        return
    rank = {name: i for i, name in enumerate(LONG_TESTS)}

    def key(item: pytest.Item) -> int:
        return rank.get(item.nodeid.removeprefix("tests/").split("[")[0], len(rank))

    items.sort(key=key)  # stable: the rest keep their order


# ---- the fake Messages API (LLM judges) -------------------------------------------------------------------
# A real HTTP server speaking the Messages API on 127.0.0.1, for the real `anthropic` client. Point a judge
# at it with `load_settings(judge="rubric", **fake_messages_api.settings_overrides())`, or a subprocess
# monitor with `env={**os.environ, **fake_messages_api.env()}`. See tests/fake_messages_api.py.


@pytest.fixture
def fake_messages_api() -> Iterator[FakeMessagesAPI]:
    """A fresh fake Messages API server for one test (brain replies until scripted otherwise)."""
    with FakeMessagesAPI() as api:
        yield api
