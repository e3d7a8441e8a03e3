"""What the migrations should have produced, and how a store differs from it (pure: no I/O but the package file).

`schemas/sql/expected_schema.json` lists every table and view the migrations create, with its kind and its columns
(name and type, as ClickHouse reports them in `system.columns`), the scores table written `{table}`. It is generated
from a fresh store by `python -m monitor.devtools.schema_snapshot`, and a test fails when it no longer matches what
the migrations create, so it cannot drift from `schemas/sql`.

`schema_differences` compares it with what a store has. What is missing (a table, a view, a column) is `fixable`:
every migration is idempotent, so `migrate` re-runs them all and re-creates it (empty), and re-adds a column a CREATE
TABLE had. What exists with another kind or type, and columns this release does not know, are not: `migrate` reports
them and changes nothing. Only the columns this release does not know (the operator's own, or a newer release's) leave
writes unharmed, so they alone do not stop `run`."""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources
from typing import Literal

from schemas.ddl import on_cluster

SNAPSHOT_FILE = "expected_schema.json"
SCORES_TABLE = "{table}"  # the scores table's name in the snapshot: it is configurable (MONITOR_CLICKHOUSE_TABLE)

Kind = Literal["table", "view", "materialized view"]


def object_kind(engine: str) -> Kind:
    """The kind of a `system.tables` row by its engine: a replicated or plain *MergeTree is just a table."""
    if engine == "View":
        return "view"
    if engine == "MaterializedView":
        return "materialized view"
    return "table"


@dataclass(frozen=True, slots=True)
class SchemaObject:
    """A table or view: its kind and its columns as (name, type), in order."""

    kind: Kind
    columns: tuple[tuple[str, str], ...]


Schema = dict[str, SchemaObject]  # by object name (the scores table's real name, or `{table}` in the snapshot)


@dataclass(frozen=True, slots=True)
class SchemaDifference:
    """One way a store differs from this release's schema, and whether re-running the migrations fixes it."""

    object: str  # database.name
    problem: str  # one line: "table is missing", "column x is missing", "column x is Int32, this release has String"
    fixable: bool
    repair: str = ""  # what re-creating it gives, for the fixable: "empty: the rows it held are gone"
    column: tuple[str, str] | None = None  # a missing column of a table: (name, type), re-added by `add_column`
    blocking: bool = True  # writes would fail or go wrong; a column of the operator's own (extra) does not block

    def __str__(self) -> str:
        return f"{self.object}: {self.problem}"


_REPAIRS: dict[Kind, str] = {
    "table": "re-created empty: the rows it held are gone",
    "view": "re-created",
    "materialized view": (
        "re-created: it fills its table from rows inserted from now on, not from those stored meanwhile"
    ),
}
_COLUMN_REPAIR = "re-added: rows already stored read its default"


def expected_schema(table: str) -> Schema:
    """The objects this release's migrations create, the scores table named `table`."""
    doc = json.loads((resources.files("schemas") / "sql" / SNAPSHOT_FILE).read_text(encoding="utf-8"))
    return {
        (table if name == SCORES_TABLE else name): SchemaObject(
            kind=obj["kind"], columns=tuple((c, t) for c, t in obj["columns"])
        )
        for name, obj in doc["objects"].items()
    }


def add_column(difference: SchemaDifference, cluster: str | None = None) -> str | None:
    """The statement re-adding a table's missing column (the migrations add only the columns a later file added:
    one of a CREATE TABLE stays missing when they re-run); None for any other difference."""
    if difference.column is None:
        return None
    name, type_ = difference.column
    statement = f"ALTER TABLE {difference.object} ADD COLUMN IF NOT EXISTS {name} {type_}"
    return on_cluster(statement, cluster) if cluster else statement


def snapshot_document(found: Schema, table: str) -> dict[str, object]:
    """The JSON document of `found` (a fresh store's schema) as the snapshot file holds it, `table` written
    `{table}`."""
    objects = {
        (SCORES_TABLE if name == table else name): {"kind": obj.kind, "columns": [list(c) for c in obj.columns]}
        for name, obj in sorted(found.items())
    }
    return {"generated_by": "python -m monitor.devtools.schema_snapshot", "objects": objects}


def schema_differences(database: str, expected: Schema, found: Schema) -> list[SchemaDifference]:
    """How `found` differs from `expected`, object by object, in the snapshot's order; objects `expected` does not
    name (another scores table, anyone's own tables) are not ours to judge and are left out."""
    out: list[SchemaDifference] = []
    for name, want in expected.items():
        where = f"{database}.{name}"
        have = found.get(name)
        if have is None:
            out.append(SchemaDifference(where, f"{want.kind} is missing", fixable=True, repair=_REPAIRS[want.kind]))
            continue
        if have.kind != want.kind:
            out.append(SchemaDifference(where, f"is a {have.kind}, this release has a {want.kind}", fixable=False))
            continue
        have_types = dict(have.columns)
        for column, type_ in want.columns:
            if column not in have_types:
                fixable = want.kind == "table"  # a view's columns come from its query: it would need dropping first
                missing = (column, type_) if fixable else None
                out.append(
                    SchemaDifference(
                        where, f"column {column} is missing", fixable, _COLUMN_REPAIR if fixable else "", missing
                    )
                )
            elif have_types[column] != type_:
                out.append(
                    SchemaDifference(
                        where, f"column {column} is {have_types[column]}, this release has {type_}", fixable=False
                    )
                )
        known = {column for column, _ in want.columns}
        for column, type_ in have.columns:
            if column not in known:
                problem = f"column {column} ({type_}) is not in this release's schema"
                out.append(SchemaDifference(where, problem, fixable=False, blocking=False))
    return out
