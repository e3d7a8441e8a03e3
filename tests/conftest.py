"""Shared fixtures: the real broker (tansu), the real store (chDB) and, below, the fake Messages API server.

chDB allows one engine path per process, so the whole session shares one path and each test gets its own
database in it."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import structlog

from monitor.config import Settings, load_settings
from monitor.devtools.localbroker import LocalBroker
from monitor.store.async_store import AsyncStore
from monitor.store.connection import ClickHouseStore
from tests.fake_messages_api import FakeMessagesAPI
from tests.harness import create_topic
from tests.properties import load_profile
from tests.store_template import StoreTemplate

load_profile()  # hypothesis: `quick` unless HYPOTHESIS_PROFILE=thorough (see tests/properties.py)


def _configure_without_caching(**settings: Any) -> None:
    """`structlog.configure` as the product calls it, with `cache_logger_on_first_use` off: an in-process command
    (`main([...])`) configures logging with caching on, and a module logger first used after that would keep the
    command's processors and ignore every later `capture_logs` of the same worker, making log assertions depend on
    which tests ran before. Subprocess monitors keep the product's caching."""
    _structlog_configure(**{**settings, "cache_logger_on_first_use": False})


_structlog_configure = structlog.configure
structlog.configure = _configure_without_caching

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
# `xdist_group` of tests sharing a module fixture) when it is nearly free. The tests that take longest (a subprocess
# service, a day of history, a benchmark, a wheel install) carry `@pytest.mark.long(seconds=N)`, N measured on 2
# cores; started first, longest first, they run beside each other and beside the many short tests instead of one of
# them ending the run alone. The marker sits on the test itself, so a renamed test keeps its place; a test that ran
# for `UNMARKED_LONG_S` or more without one is named at the end of the run.
UNMARKED_LONG_S = 30.0
_slow_unmarked: list[tuple[str, float]] = []


def expected_seconds(item: pytest.Item) -> float:
    """How long a test takes by its `long` marker (0 for the rest)."""
    marker = item.get_closest_marker("long")
    if marker is None:
        return 0.0
    return float(marker.kwargs.get("seconds", marker.args[0] if marker.args else UNMARKED_LONG_S))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under xdist, the long tests first, longest first; the rest keep their collection order."""
    if not hasattr(config, "workerinput"):  # serial: keep pytest's order, which groups module fixtures
        return
    items.sort(key=lambda item: -expected_seconds(item))  # stable


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Note a test whose call took `UNMARKED_LONG_S` or more without a `long` marker (on the controller too)."""
    if report.when == "call" and report.duration >= UNMARKED_LONG_S and "long" not in report.keywords:
        _slow_unmarked.append((report.nodeid, report.duration))


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """Name the long tests that have no `long` marker, so the schedule can be kept true."""
    if _slow_unmarked:
        terminalreporter.write_sep("-", "long tests without @pytest.mark.long(seconds=N): add it to start them first")
        for nodeid, seconds in sorted(_slow_unmarked, key=lambda t: -t[1]):
            terminalreporter.write_line(f"{seconds:6.1f} s  {nodeid}")


# ---- the fake Messages API (LLM judges) -------------------------------------------------------------------
# A real HTTP server speaking the Messages API on 127.0.0.1, for the real `anthropic` client. Point a judge
# at it with `load_settings(judge="rubric", **fake_messages_api.settings_overrides())`, or a subprocess
# monitor with `env={**os.environ, **fake_messages_api.env()}`. See tests/fake_messages_api.py.


@pytest.fixture
def fake_messages_api() -> Iterator[FakeMessagesAPI]:
    """A fresh fake Messages API server for one test (brain replies until scripted otherwise)."""
    with FakeMessagesAPI() as api:
        yield api
