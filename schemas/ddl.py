"""The ClickHouse DDL, as versioned .sql files applied in name order. Every statement is idempotent.

A file named `*.per_grain.sql` is a template rendered once per rollup grain (`ROLLUP_GRAINS`: minute, then
hour), so the minute and hour rollups cannot drift apart; its `{grain.…}` placeholders name the grain's objects."""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
PER_GRAIN_SUFFIX = ".per_grain.sql"


@dataclass(frozen=True, slots=True)
class RollupGrain:
    """One time grain of the rollups: its objects' names, its time column and the function that fills it."""

    rollup: str  # the AggregatingMergeTree table
    mv: str  # the materialized view filling it from the scores table
    view: str  # the plain view over it
    column: str  # the time column: the start of the minute or hour of event_time
    bucket: str  # the ClickHouse function computing `column` from event_time


ROLLUP_GRAINS = (
    RollupGrain("relevancy_rollup_1m", "relevancy_rollup_1m_mv", "relevancy_minutely", "minute", "toStartOfMinute"),
    RollupGrain("relevancy_rollup_1h", "relevancy_rollup_1h_mv", "relevancy_hourly", "hour", "toStartOfHour"),
)


def _check_identifier(kind: str, value: str) -> str:
    if not _IDENT.match(value):
        raise ValueError(f"{kind} name {value!r} is not a plain identifier ([A-Za-z_][A-Za-z0-9_]*)")
    return value


def ddl_files() -> list[str]:
    """Names of the DDL files, in the order they are applied."""
    folder = resources.files("schemas") / "sql"
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".sql"))


def render_ddl(database: str, table: str) -> list[str]:
    """The DDL statements with the configured database and table names filled in, in order."""
    names = {"database": _check_identifier("database", database), "table": _check_identifier("table", table)}
    folder = resources.files("schemas") / "sql"
    statements = []
    for name in ddl_files():
        text = (folder / name).read_text(encoding="utf-8")
        body = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("--")).strip()
        if name.endswith(PER_GRAIN_SUFFIX):
            statements += [body.format(**names, grain=grain) for grain in ROLLUP_GRAINS]
        else:
            statements.append(body.format(**names))
    return statements
