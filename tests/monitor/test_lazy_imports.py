"""What building the service loads, per configuration: a process pays, in resident memory, for every package it
imports (the Anthropic SDK alone is ~45 MB), so the service imports a judge's SDK, the embedded engine or the SQL
parser only when its configuration needs them. Each check builds the service's pipeline in a fresh interpreter, as
`relevancy-monitor run` does, and reads `sys.modules` (memory figures belong in bench/memory_backlog.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
# Packages that only some configurations need.
OPTIONAL = ("anthropic", "openai", "botocore", "google.auth", "chdb", "sqlglot")
# The OpenTelemetry reader and what it loads (protobuf and opentelemetry-proto, ~2 MB resident): OTLP topics only. The
# settings read `consumers.otlp.dialects` (defaults only, nothing heavy), so the reader's own modules are named.
OTLP_READER = ("consumers.otlp.records", "consumers.otlp.wire", "google.protobuf", "opentelemetry")

# Builds the pipeline as `run_service` does, without starting it: no client connects while it is built.
_PROBE = """
import asyncio, json, sys
from monitor.config import load_settings
from monitor.judges.factory import build_judge
from monitor.runtime.logs import configure_logging
from monitor.runtime.metrics import Metrics
from monitor.runtime.service import build_pipeline
from monitor.store.async_store import AsyncStore

configure_logging("json", "warning")

async def build() -> None:
    settings = load_settings(**json.loads(sys.argv[1]))
    build_pipeline(settings, build_judge(settings.judge), AsyncStore.from_settings(settings.store), Metrics())

asyncio.run(build())
print(json.dumps(sorted(name for name in json.loads(sys.argv[2]) if name in sys.modules)))
"""

BASE = {
    "kafka_bootstrap_servers": "127.0.0.1:1",
    "kafka_topics": ["conversations"],
    "kafka_group_id": "lazy-imports",
    "dlq_topic": "conversations.dlq",
    "clickhouse_url": "http://127.0.0.1:1",
    "metrics_port": 0,
}
LLM = {"judge": "statements", "judge_api_key": "test-key"}


def loaded(settings: Mapping[str, object], names: tuple[str, ...] = OPTIONAL) -> list[str]:
    """Which of `names` a fresh interpreter has imported once it has built the pipeline for `settings`."""
    return fresh_interpreter(_PROBE, json.dumps({**BASE, **settings}), json.dumps(names))


def fresh_interpreter(program: str, *args: str) -> list[str]:
    """The names a fresh interpreter prints last (as JSON) after running `program` with `args`, from the repository and
    without the caller's monitor or provider settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MONITOR_", "ANTHROPIC_", "OPENAI_", "AZURE_"))}
    env["PYTHONPATH"] = str(REPO)
    out = subprocess.run(
        [sys.executable, "-c", program, *args], capture_output=True, text=True, env=env, cwd=REPO, timeout=120
    )
    assert out.returncode == 0, out.stderr[-2000:]
    names: list[str] = json.loads(out.stdout.strip().splitlines()[-1])
    return names


def test_lexical_json_server_loads_no_sdk_engine_or_sql_parser() -> None:
    """The lexical judge on JSON input with a ClickHouse server loads no judge SDK, no chDB and no sqlglot (read
    only when a retention is managed)."""
    assert loaded({"judge": "lexical", "input_format": "events"}) == []


def test_json_input_loads_no_opentelemetry_reader() -> None:
    """On the monitor's own JSON events the pipeline loads neither the OpenTelemetry reader nor protobuf."""
    assert loaded({"judge": "lexical", "input_format": "events"}, OTLP_READER) == []


@pytest.mark.parametrize(
    "settings",
    [
        {"input_format": "otlp_proto"},
        {"input_format": "otlp_json"},
        {"kafka_topics": ["otlp_spans", "otlp_logs"], "input_format": "otlp_proto"},
    ],
    ids=["spans-proto", "spans-json", "spans-and-logs-joined"],
)
def test_otlp_input_loads_the_reader_with_the_pipeline(settings: dict[str, object]) -> None:
    """An OTLP topic (spans alone, or spans and log records joined) loads the reader and protobuf when the pipeline
    is built, not at its first record."""
    assert loaded({"judge": "lexical", **settings}, OTLP_READER) == sorted(OTLP_READER)


@pytest.mark.parametrize(
    ("provider", "settings"),
    [
        ("anthropic", {}),
        ("bedrock", {"judge_model": "us.anthropic.claude-haiku-5-5-v1:0", "judge_region": "us-east-1"}),
        ("vertex", {"judge_model": "claude-haiku-5-5", "judge_region": "us-east5", "judge_project": "p"}),
    ],
)
def test_a_messages_api_provider_loads_the_anthropic_sdk_only(provider: str, settings: dict[str, str]) -> None:
    """Anthropic, Bedrock and Vertex judges load the Anthropic SDK and no other judge SDK, engine or SQL parser (the
    clouds' credential libraries load at the first request, not when the judge is built)."""
    assert loaded({**LLM, "judge_provider": provider, **settings}) == ["anthropic"]


@pytest.mark.parametrize("provider", ["openai", "azure_openai"])
def test_a_chat_completions_provider_loads_the_openai_sdk_only(provider: str) -> None:
    """OpenAI-compatible judges load the OpenAI SDK and not the Anthropic one (whose schema transform names the
    reply format in the judge id: a copy pinned to it stands in)."""
    settings = {**LLM, "judge_provider": provider, "judge_model": "gpt-5-mini"}
    if provider == "azure_openai":
        settings["judge_base_url"] = "https://name.openai.azure.com/openai/v1"
    assert loaded(settings) == ["openai"]


def test_an_embedded_store_url_loads_no_engine_before_the_store_opens() -> None:
    """A chdb:// URL loads the engine when the store opens (clickhouse-connect imports chDB then), not when the
    service's modules are imported or its pipeline built."""
    assert loaded({"judge": "lexical", "clickhouse_url": "chdb:///nonexistent-dir-for-lazy-imports"}) == []


# Migrates a store on a ClickHouse HTTP server (chDB in a process of its own, bench/clickhouse_http.py) and inserts
# scored rows, as the service does, then lists the array libraries this process loaded.
_STORE_PROBE = """
import asyncio, json, sys, tempfile
from datetime import UTC, datetime
from pathlib import Path
from bench.clickhouse_http import chdb_server
from monitor.store.async_store import AsyncStore
from monitor.store.connection import ClickHouseStore
from monitor.store.migrations import Migrations
from schemas.scored import ScoredRow

AT = datetime(2026, 12, 1, 9, 30, tzinfo=UTC)

def row(i: int) -> ScoredRow:
    return ScoredRow(
        event_id=f"e{i}", conversation_id="c", event_time=AT, app="support", model="m1", prompt_version="v1",
        judge="lexical", judge_model="", judge_id="j1", status="ok", error="", score=0.8, raw_score=0.8,
        reasoning="r", question="q", response="a", statements=["s"], verdicts=["yes"], verdict_reasons=[""],
        n_statements=1, sample_rate=1.0, sample_rule="base", cost_usd=0.001, scored_at=AT, latency_ms=100,
    )

async def write(url: str) -> int:
    connection = ClickHouseStore(url, "lazy", "relevancy_scores")
    store = AsyncStore(connection, Migrations(connection, auto_migrate=True))
    await store.open()
    await store.insert_rows([row(i) for i in range(3)], "t")
    count = (await store.query("SELECT count() FROM lazy.relevancy_scores")).rows[0][0]
    await store.close()
    return int(count)

if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp, chdb_server(Path(tmp)) as (url, _):
        stored = asyncio.run(write(url))
    print(json.dumps([stored, sorted(m for m in ("pandas", "numpy", "pyarrow", "chdb") if m in sys.modules)]))
"""


def test_a_server_store_writes_rows_without_loading_array_libraries() -> None:
    """On a ClickHouse server the store migrates and inserts scored rows without pandas, numpy or pyarrow (~80 MB
    resident: clickhouse-connect imports them at the first insert to check for a DataFrame) and without chDB."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    out = subprocess.run(
        [sys.executable, "-c", _STORE_PROBE], capture_output=True, text=True, env=env, cwd=REPO, timeout=180
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(out.stdout.strip().splitlines()[-1]) == [3, []]


# What `relevancy-monitor run` imports, in its order (`monitor.cli.commands.cmd_run`), then the pipeline built for JSON
# input with the lexical judge, logging as configured by argv[1]; prints the rendering packages it loaded.
_RUN_PROBE = """
import asyncio, json, sys
from consumers.clients import client_kwargs
from monitor.runtime.logs import configure_logging
from monitor.runtime.service import build_pipeline
from monitor.config import load_settings
from monitor.judges.factory import build_judge
from monitor.runtime.metrics import Metrics
from monitor.store.async_store import AsyncStore

configure_logging(sys.argv[1], "warning")

async def build() -> None:
    settings = load_settings(**json.loads(sys.argv[2]))
    build_pipeline(settings, build_judge(settings.judge), AsyncStore.from_settings(settings.store), Metrics())

asyncio.run(build())
print(json.dumps(sorted(name for name in ("rich", "pygments", "attr") if name in sys.modules)))
"""


def _run_imports(log_format: str) -> list[str]:
    settings = json.dumps({**BASE, "judge": "lexical", "input_format": "events"})
    return fresh_interpreter(_RUN_PROBE, log_format, settings)


def test_json_logs_load_no_console_rendering_packages() -> None:
    """With JSON logs, `run` loads neither rich nor pygments nor attrs (~5 MB, which structlog imports itself only
    for the console renderer's tracebacks)."""
    assert _run_imports("json") == []


def test_console_logs_still_render_library_exceptions_with_rich() -> None:
    """On the console, a library's log record with an exception is rendered by rich's traceback, as structlog renders
    it when it imports rich itself."""
    probe = (
        "import logging\n"
        "from monitor.runtime.logs import configure_logging\n"
        "configure_logging('console', 'info')\n"
        "try:\n"
        "    1 / 0\n"
        "except ZeroDivisionError:\n"
        "    logging.getLogger('aiokafka').exception('fetch failed')\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        cwd=REPO,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert "fetch failed" in out.stderr and "─ Traceback (most recent call last) ─" in out.stderr
