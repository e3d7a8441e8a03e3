"""Retention as ClickHouse TTLs: how long rows and their text are kept (MONITOR_RETENTION_DAYS,
MONITOR_TEXT_RETENTION_DAYS), and the ALTER statements that bring a store's tables there. Pure: no I/O.

Rows of the scores table, `traffic_counts`, the rollups (`relevancy_rollup_1m`, `relevancy_rollup_1h`), the canary
runs (`canary_runs`), users' feedback (`feedback`) and its rollup (`feedback_rollup_1m`) get a table TTL of
`retention_days` after their time (the scores table's `event_time`, a canary run's `run_at`, a feedback row's
`feedback_time`, the others' minute or hour column); 0 keeps them forever (no TTL). Canary rows hold no conversation
text (the pairs are in the labels file), so they have no text TTL. The text columns of the scores table
(`TEXT_COLUMNS`) and a feedback row's comment (`FEEDBACK_TEXT_COLUMNS`, the user's free text) get a column TTL of
`text_retention_days` after the row's time: ClickHouse empties them (their default: '' or []) and keeps the row; 0,
or a value not shorter than the row's retention, leaves them without one (they go with the row).

The settings are authoritative over those TTLs: a table TTL or text-column TTL that differs (set by hand, or by an
earlier setting) is replaced, and removed when the setting is 0. `plan_retention` compares what each table has (its
`create_table_query` from `system.tables`, read by a SQL parser: see `parse_table`) with what is wanted, as parsed
expressions (`INTERVAL 30 DAY` is ClickHouse's `toIntervalDay(30)`), and returns only the differences, one ALTER per
table, so applying a plan twice is a no-op.

`event_time`, `run_at` and `feedback_time` are DateTime64(3): the TTL reads `toDateTime(...)` of them, a DateTime,
which every ClickHouse version accepts in a TTL (recent ones take DateTime64 as well)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from schemas.canary import CANARY_TABLE
from schemas.ddl import ROLLUP_GRAINS, on_cluster
from schemas.feedback import FEEDBACK_ROLLUP_TABLE, FEEDBACK_TABLE

# sqlglot (7 MB resident once imported) is imported where a TTL is read: only with MONITOR_RETENTION_DAYS set, or by
# `migrate`, so a service that manages no retention never loads it.
if TYPE_CHECKING:
    from sqlglot import exp

TEXT_COLUMNS = ("question", "response", "reasoning", "statements", "verdict_reasons", "context", "system_instructions")
FEEDBACK_TEXT_COLUMNS = ("comment",)
TRAFFIC_TABLE = "traffic_counts"
_SCORES_TIME = "toDateTime(event_time)"
_CANARY_TIME = "toDateTime(run_at)"  # DateTime64(3), like event_time
_FEEDBACK_TIME = "toDateTime(feedback_time)"  # DateTime64(3), like event_time

# Sent with every retention ALTER. A MODIFY TTL (or a column TTL) changes the table's metadata at once; with
# materialize_ttl_after_modify=1 (ClickHouse's default, set here so a profile cannot turn it off) it also queues a
# MATERIALIZE TTL mutation that rewrites the existing parts in the background, so rows already stored beyond the
# new retention are deleted and old text emptied. That rewrite is heavy on a big table, but without it the existing
# parts keep their old TTL and a privacy retention would only ever reach rows inserted afterwards. The cost is paid
# only when the retention changes: each table's changes go in one ALTER (one mutation), and an unchanged retention
# issues no ALTER at all. The ALTER does not wait for the rewrite (unless the session sets mutations_sync, which
# chDB does: there migrate waits); it can be followed in system.mutations.
ALTER_SETTINGS: Mapping[str, int] = {"materialize_ttl_after_modify": 1}

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True, slots=True)
class TableTTLs:
    """The TTLs one table should have: its table TTL and its managed columns' (None: no TTL)."""

    table: str
    ttl: str | None
    columns: tuple[tuple[str, str | None], ...] = ()


@dataclass(frozen=True, slots=True)
class TTLChange:
    """One TTL that differs: on `table` (unqualified), or on its `column`; `before` as the table has it (None: none),
    `after` as wanted (None: to be removed)."""

    table: str
    column: str | None
    before: str | None
    after: str | None

    def __str__(self) -> str:
        where = f"{self.table}.{self.column}" if self.column else self.table
        kind = "text TTL" if self.column else "TTL"
        if self.after is None:
            return f"{where}: {kind} {self.before} removed"
        return f"{where}: {kind} {self.before or 'none'} -> {self.after}"


@dataclass(frozen=True, slots=True)
class RetentionPlan:
    """What it takes to bring the retention of a database's tables to the settings: the differing TTLs and the
    ALTER statements (one per table, ON CLUSTER with a cluster) applying them. Empty when nothing differs."""

    database: str
    retention_days: int
    text_retention_days: int
    changes: tuple[TTLChange, ...] = ()
    statements: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.changes)

    @property
    def wanted(self) -> str:
        """The retention asked for, in words: `rows 30 days, text 7 days`."""
        rows = f"{self.retention_days} days" if self.retention_days else "forever"
        text = (
            f"{self.text_retention_days} days"
            if _text_ttl_wanted(self.retention_days, self.text_retention_days)
            else "as long as the row"
        )
        return f"rows {rows}, text {text}"

    def describe(self) -> list[str]:
        """One line per differing TTL, the table qualified: `relevancy.relevancy_scores: TTL none -> ...`."""
        return [f"{self.database}.{change}" for change in self.changes]

    def summary(self) -> str:
        """The differing TTLs in one line, in days, the tables grouped by what they have and what is wanted:
        `retention: TTL of relevancy.traffic_counts, relevancy.canary_runs is 30 days, MONITOR_RETENTION_DAYS wants 7
        days`."""
        groups: dict[tuple[bool, str, str], list[str]] = {}
        for change in self.changes:
            tables = groups.setdefault((change.column is not None, ttl_days(change.before), ttl_days(change.after)), [])
            if f"{self.database}.{change.table}" not in tables:
                tables.append(f"{self.database}.{change.table}")
        parts = [
            f"{'text TTL' if text else 'TTL'} of {', '.join(tables)} is {have}, "
            f"{'MONITOR_TEXT_RETENTION_DAYS' if text else 'MONITOR_RETENTION_DAYS'} wants {want}"
            for (text, have, want), tables in groups.items()
        ]
        return f"retention: {'; '.join(parts)}"


_DAYS = re.compile(r"toIntervalDay\(\s*'?(\d+)'?\s*\)|INTERVAL\s+'?(\d+)'?\s+DAY", re.IGNORECASE)


def ttl_days(ttl: str | None) -> str:
    """A TTL expression as its number of days (`30 days`), `none`, or the expression itself when it is not a whole
    number of days (set by hand)."""
    if ttl is None:
        return "none"
    found = _DAYS.search(ttl)
    return f"{found.group(1) or found.group(2)} days" if found else ttl


def _text_ttl_wanted(retention_days: int, text_retention_days: int) -> bool:
    return text_retention_days > 0 and (retention_days == 0 or text_retention_days < retention_days)


def retention_tables(table: str) -> tuple[str, ...]:
    """The tables whose retention is managed, for the scores table `table`: it, the traffic table, the rollups, the
    canary runs, users' feedback and its rollup."""
    return (
        table,
        TRAFFIC_TABLE,
        *(grain.rollup for grain in ROLLUP_GRAINS),
        CANARY_TABLE,
        FEEDBACK_TABLE,
        FEEDBACK_ROLLUP_TABLE,
    )


def wanted_ttls(table: str, retention_days: int, text_retention_days: int) -> tuple[TableTTLs, ...]:
    """The TTL wanted on each managed table (see the module's docstring); raises ValueError for a negative number
    of days or a table name that is not a plain identifier."""
    if retention_days < 0 or text_retention_days < 0:
        raise ValueError(f"retention days must be 0 or more (got {retention_days} and {text_retention_days})")
    if not _IDENT.match(table):
        raise ValueError(f"table name {table!r} is not a plain identifier")

    def after(time: str, days: int) -> str | None:
        return f"{time} + INTERVAL {days} DAY" if days > 0 else None

    def text(time: str) -> str | None:
        return after(time, text_retention_days) if _text_ttl_wanted(retention_days, text_retention_days) else None

    return (
        TableTTLs(table, after(_SCORES_TIME, retention_days), tuple((c, text(_SCORES_TIME)) for c in TEXT_COLUMNS)),
        TableTTLs(TRAFFIC_TABLE, after("minute", retention_days)),
        *(TableTTLs(grain.rollup, after(grain.column, retention_days)) for grain in ROLLUP_GRAINS),
        TableTTLs(CANARY_TABLE, after(_CANARY_TIME, retention_days)),
        TableTTLs(
            FEEDBACK_TABLE,
            after(_FEEDBACK_TIME, retention_days),
            tuple((c, text(_FEEDBACK_TIME)) for c in FEEDBACK_TEXT_COLUMNS),
        ),
        TableTTLs(FEEDBACK_ROLLUP_TABLE, after("minute", retention_days)),
    )


@dataclass(frozen=True, slots=True)
class ColumnDef:
    """A column as `create_table_query` declares it: its type and its TTL expression (None: none)."""

    type: str
    ttl: str | None


@dataclass(frozen=True, slots=True)
class TableDef:
    """The TTL-relevant parts of a table's `create_table_query` (or `engine_full`, which has no columns)."""

    ttl: str | None
    columns: Mapping[str, ColumnDef]


def plan_retention(
    database: str,
    table: str,
    retention_days: int,
    text_retention_days: int,
    current: Mapping[str, str],
    cluster: str | None = None,
) -> RetentionPlan:
    """The plan taking the managed tables of `database` from `current` ({table: its create_table_query}) to the
    retention wanted: for each table whose TTLs differ, one `ALTER TABLE db.t [ON CLUSTER c] MODIFY COLUMN c <type>
    TTL ... | MODIFY COLUMN c REMOVE TTL, ..., MODIFY TTL ... | REMOVE TTL`. Raises ValueError for a managed table
    missing from `current`, or a text column missing from its table."""
    if not _IDENT.match(database):
        raise ValueError(f"database name {database!r} is not a plain identifier")
    changes: list[TTLChange] = []
    statements: list[str] = []
    for want in wanted_ttls(table, retention_days, text_retention_days):
        if want.table not in current:
            raise ValueError(f"table {database}.{want.table} not found")
        have = parse_table(current[want.table])
        commands: list[str] = []
        for column, ttl in want.columns:
            found = have.columns.get(column)
            if found is None:
                raise ValueError(f"column {column} not found in {database}.{want.table}")
            if not _same(found.ttl, ttl):
                changes.append(TTLChange(want.table, column, found.ttl, ttl))
                commands.append(
                    f"MODIFY COLUMN {column} {found.type} TTL {ttl}" if ttl else f"MODIFY COLUMN {column} REMOVE TTL"
                )
        if not _same(have.ttl, want.ttl):
            changes.append(TTLChange(want.table, None, have.ttl, want.ttl))
            # Last: the table TTL is a comma-separated list, so a command after it would be read as another element.
            commands.append(f"MODIFY TTL {want.ttl}" if want.ttl else "REMOVE TTL")
        if commands:
            statement = f"ALTER TABLE {database}.{want.table} {', '.join(commands)}"
            statements.append(on_cluster(statement, cluster) if cluster else statement)
    return RetentionPlan(database, retention_days, text_retention_days, tuple(changes), tuple(statements))


# ---- reading a create_table_query ---------------------------------------------------------------------------
# Read with sqlglot's ClickHouse dialect rather than ClickHouse's own answers, because the engine (chDB 26.9, checked)
# gives no TTL apart from `create_table_query`: system.columns and system.tables have no TTL column. Also, formatQuery
# keeps brackets and a quoted count (`(minute + toIntervalDay('30'))`), and EXPLAIN AST returns a tree without the
# text that a change reports, in a format we would have to parse ourselves. sqlglot reads the whole CREATE (quoted
# names, nested types, DEFAULT, CODEC, COMMENT, INDEX, TTL ... WHERE), and it renders the type of every column of this
# schema exactly as system.columns does (tests/monitor/store/test_retention.py), in 60 lines where the hand-written
# reading took 130. It cannot read a column's own `SETTINGS (...)`, which this schema does not use: such a table is
# refused with a ValueError, which `migrate` reports.


def _ttl(nodes: Iterable[object]) -> str | None:
    """The TTL among a column's constraint kinds or a table's properties, as text without `TTL` (None: none)."""
    from sqlglot import exp

    ttl = next((node for node in nodes if isinstance(node, exp.MergeTreeTTL)), None)
    return ttl.sql("clickhouse").removeprefix("TTL ") if ttl else None


def parse_table(create_table_query: str) -> TableDef:
    """The table TTL and the columns (type, TTL) of a `create_table_query` as `system.tables` renders it; raises
    ValueError for a query that is not a CREATE with a column list, or that sqlglot cannot read."""
    import sqlglot
    from sqlglot import exp

    try:
        query = sqlglot.parse_one(create_table_query, read="clickhouse")
    except sqlglot.ParseError as e:
        detail = e.errors[0]["description"] if e.errors else str(e)
        raise ValueError(f"cannot read {create_table_query[:80]!r}: {detail}") from None
    if not isinstance(query, exp.Create) or not isinstance(query.this, exp.Schema):
        raise ValueError(f"no column list in {create_table_query[:80]!r}")
    columns = {
        column.name: ColumnDef(column.args["kind"].sql("clickhouse"), _ttl([c.kind for c in column.constraints]))
        for column in query.this.expressions
        if isinstance(column, exp.ColumnDef)
    }
    properties = query.args.get("properties")
    return TableDef(_ttl(properties.expressions if properties else []), columns)


def _same(a: str | None, b: str | None) -> bool:
    """Whether two TTLs (a table's or a column's, as text; None: none) are the same once parsed."""
    if a is None or b is None:
        return a is None and b is None
    return _key(_parse_ttl(a)) == _key(_parse_ttl(b))


def _parse_ttl(text: str) -> exp.Expression:
    import sqlglot
    from sqlglot import exp

    return sqlglot.parse_one(f"TTL {text}", read="clickhouse", into=exp.Properties)


def _key(node: object) -> object:
    """A parsed TTL as a structure to compare: brackets dropped (the tree keeps the grouping), names unquoted, and
    `INTERVAL 30 DAY`, `toIntervalDay('30')` and `toIntervalDay(30)` the same. Exact, unlike sqlglot's `==` (a hash,
    blind to the case of names)."""
    from sqlglot import exp

    if isinstance(node, exp.Paren):
        return _key(node.this)
    if isinstance(node, exp.Identifier):
        return node.name
    if isinstance(node, exp.Interval) and node.unit is not None:
        return _interval(f"toInterval{node.unit.name.capitalize()}", node.this)
    if isinstance(node, exp.Anonymous) and node.name.startswith("toInterval") and len(node.expressions) == 1:
        return _interval(node.name, node.expressions[0])
    if isinstance(node, exp.Expression):
        args = sorted((k, v) for k, v in node.args.items() if v is not None and v is not False and v != [])
        return (node.key, tuple((k, _key(v)) for k, v in args))
    if isinstance(node, list):
        return tuple(_key(item) for item in node)
    return node


def _interval(function: str, count: object) -> object:
    # sqlglot reads the 30 of `INTERVAL 30 DAY` as the string '30'; ClickHouse renders `INTERVAL '30' DAY` as
    # `toIntervalDay('30')`: a count of digits is the same number either way.
    from sqlglot import exp

    return (function, count.this if isinstance(count, exp.Literal) and count.this.isdigit() else _key(count))
