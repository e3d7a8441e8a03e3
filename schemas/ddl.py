"""The ClickHouse DDL, as versioned .sql files applied in name order. Every statement is idempotent.

A file named `*.per_grain.sql` is a template rendered once per rollup grain (`ROLLUP_GRAINS`: minute, then
hour), so the minute and hour rollups cannot drift apart; its `{grain.…}` placeholders name the grain's objects.

Each file is one migration (`migrations`): its version is the number its name starts with, its checksum is over
its SQL (comment lines excluded, so comments may be edited). `relevancy-monitor migrate` applies the pending ones
in order and records each in `{database}.schema_migrations`; an applied file must never change (its checksum is
checked), so a changed column or a new index is a new numbered file.

With a cluster (MONITOR_CLICKHOUSE_CLUSTER) every CREATE gets `ON CLUSTER <name>` and every *MergeTree engine its
Replicated* form, with the replication path and replica from the servers' {shard} and {replica} macros; without
one, the DDL is exactly the files'."""

from __future__ import annotations

import hashlib
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


MIGRATIONS_TABLE = "schema_migrations"
_VERSION = re.compile(r"^(\d+)_")


@dataclass(frozen=True, slots=True)
class Migration:
    """One DDL file: its version (the leading number), file name, checksum and rendered statements."""

    version: str
    name: str
    checksum: str
    statements: tuple[str, ...]


def _body(text: str) -> str:
    return "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("--")).strip()


# The start of a CREATE up to its object's name, where ClickHouse wants `ON CLUSTER`.
_CREATE = re.compile(r"^(CREATE (?:DATABASE|TABLE|VIEW|MATERIALIZED VIEW) IF NOT EXISTS [A-Za-z_][A-Za-z0-9_.]*)")
# The same place in an ALTER TABLE (`ALTER TABLE db.t ON CLUSTER c MODIFY TTL ...`) and a lightweight DELETE
# (`DELETE FROM db.t ON CLUSTER c WHERE ...`): right after the table's name, before the commands or WHERE.
_ALTER_OR_DELETE = re.compile(r"^((?:ALTER TABLE|DELETE FROM) [A-Za-z_][A-Za-z0-9_.]*)(?=\s)(?!\s+ON CLUSTER\b)")
_ENGINE = re.compile(r"\bENGINE = ([A-Za-z]*)MergeTree\b(?:\(([^()]*)\))?")
# Where replicas keep a table in (Zoo)Keeper: ClickHouse expands these macros itself, per table and server.
REPLICA_PATH = "/clickhouse/tables/{shard}/{database}/{table}"
REPLICA_NAME = "{replica}"


def on_cluster(statement: str, cluster: str) -> str:
    """`statement` for a cluster: `ON CLUSTER <cluster>` after the created object's name, a *MergeTree engine made
    Replicated* (path and replica from the servers' macros), the non-replicated dedup window made the replicated one.
    An `ALTER TABLE db.t ...` or `DELETE FROM db.t ...` gets only `ON CLUSTER <cluster>` after the table's name."""
    _check_identifier("cluster", cluster)
    out, found = _ALTER_OR_DELETE.subn(rf"\1 ON CLUSTER {cluster}", statement, count=1)
    if found:
        return out
    out, found = _CREATE.subn(rf"\1 ON CLUSTER {cluster}", statement, count=1)
    if not found:
        raise ValueError(
            f"cannot place ON CLUSTER in a statement that is not a CREATE ... IF NOT EXISTS, ALTER TABLE or DELETE "
            f"FROM: {statement[:80]!r}"
        )

    def replicated(m: re.Match[str]) -> str:
        args = ", ".join(a for a in (f"'{REPLICA_PATH}'", f"'{REPLICA_NAME}'", (m.group(2) or "").strip()) if a)
        return f"ENGINE = Replicated{m.group(1)}MergeTree({args})"

    out = _ENGINE.sub(replicated, out)
    return out.replace("non_replicated_deduplication_window", "replicated_deduplication_window")


def migrations(database: str, table: str, cluster: str | None = None) -> list[Migration]:
    """Every DDL file as a migration, in the order they are applied, rendered for `database`, `table` and the
    optional `cluster`; raises ValueError for a file without a version or two files with the same one."""
    names = {"database": _check_identifier("database", database), "table": _check_identifier("table", table)}
    folder = resources.files("schemas") / "sql"
    out: list[Migration] = []
    for name in ddl_files():
        match = _VERSION.match(name)
        if match is None:
            raise ValueError(f"schema file {name} does not start with a version number (NNN_)")
        body = _body((folder / name).read_text(encoding="utf-8"))
        if name.endswith(PER_GRAIN_SUFFIX):
            statements = [body.format(**names, grain=grain) for grain in ROLLUP_GRAINS]
        else:
            statements = [body.format(**names)]
        if cluster is not None:
            statements = [on_cluster(st, cluster) for st in statements]
        checksum = hashlib.sha256(body.encode()).hexdigest()
        out.append(Migration(match.group(1), name, checksum, tuple(statements)))
    versions = [m.version for m in out]
    if len(set(versions)) != len(versions):
        twice = sorted({v for v in versions if versions.count(v) > 1})
        raise ValueError(f"schema files share a version: {', '.join(twice)}")
    return out


def render_ddl(database: str, table: str, cluster: str | None = None) -> list[str]:
    """The DDL statements with the configured database and table names filled in, in order (for `cluster`, if given)."""
    return [statement for m in migrations(database, table, cluster) for statement in m.statements]


def migrations_table_ddl(database: str, cluster: str | None = None) -> list[str]:
    """The statements creating the database and `{database}.schema_migrations`, the record of applied migrations:
    one row per scores table (the DDL is rendered for it; a database may hold several) and version; a version applied
    twice at once by two replicas collapses to one row."""
    _check_identifier("database", database)
    statements = [
        f"CREATE DATABASE IF NOT EXISTS {database}",
        f"CREATE TABLE IF NOT EXISTS {database}.{MIGRATIONS_TABLE}\n(\n    scores_table  String,\n    version       "
        "String,\n"
        "    name          String,\n    checksum      String,\n    applied_at    DateTime64(3, 'UTC')\n)\n"
        "ENGINE = ReplacingMergeTree(applied_at)\nORDER BY (scores_table, version)",
    ]
    return [on_cluster(st, cluster) for st in statements] if cluster is not None else statements
