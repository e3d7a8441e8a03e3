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
from monitor.store.migrations import Migrations
from tests.fake_messages_api import FakeMessagesAPI
from tests.harness import create_topic

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


@pytest.fixture
def store(clickhouse_url: str, database: str) -> Iterator[ClickHouseStore]:
    """A synchronous store on a fresh database with the schema created; dropped afterwards."""
    s = ClickHouseStore(clickhouse_url, database, "relevancy_scores")
    Migrations(s).ensure()
    yield s
    s.command(f"DROP DATABASE IF EXISTS {database}")


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


# ---- the fake Messages API (LLM judges) -------------------------------------------------------------------
# A real HTTP server speaking the Messages API on 127.0.0.1, for the real `anthropic` client. Point a judge
# at it with `load_settings(judge="rubric", **fake_messages_api.settings_overrides())`, or a subprocess
# monitor with `env={**os.environ, **fake_messages_api.env()}`. See tests/fake_messages_api.py.


@pytest.fixture
def fake_messages_api() -> Iterator[FakeMessagesAPI]:
    """A fresh fake Messages API server for one test (brain replies until scripted otherwise)."""
    with FakeMessagesAPI() as api:
        yield api
