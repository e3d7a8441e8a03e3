"""Writes `schemas/sql/expected_schema.json`: what this release's migrations create, read from a fresh store.

Run it after adding a migration: `python -m monitor.devtools.schema_snapshot`. The suite checks that the file matches
what the migrations create (`tests/schemas/test_schema_check.py`), so a stale file fails there, naming this command."""

from __future__ import annotations

import json
import sys
import tempfile
from importlib import resources
from pathlib import Path

from monitor.store.connection import ClickHouseStore
from monitor.store.migrations import Migrations
from schemas.ddl import migrations_table_ddl, render_ddl
from schemas.schema_check import SNAPSHOT_FILE, snapshot_document

DATABASE, TABLE = "relevancy", "relevancy_scores"


def fresh_schema_document(store: ClickHouseStore) -> dict[str, object]:
    """The snapshot document of `store`'s database after running every migration's statements on it (a fresh one)."""
    for statement in (*migrations_table_ddl(store.database), *render_ddl(store.database, store.table)):
        store.command(statement)
    return snapshot_document(Migrations(store).found(), store.table)


def render(document: dict[str, object]) -> str:
    """The file's text: objects in name order, one column a line, so a diff shows the columns that changed."""
    objects = document["objects"]
    assert isinstance(objects, dict)
    parts = []
    for name, obj in objects.items():
        columns = ",\n".join(f"    {json.dumps(c)}" for c in obj["columns"])
        parts.append(f'  {json.dumps(name)}: {{"kind": {json.dumps(obj["kind"])}, "columns": [\n{columns}\n  ]}}')
    objects_text = ",\n".join(parts)
    return f'{{"generated_by": {json.dumps(document["generated_by"])},\n "objects": {{\n{objects_text}\n }}\n}}\n'


def main() -> int:
    """Write the snapshot from a fresh embedded store in a temporary directory; print where."""
    with tempfile.TemporaryDirectory(prefix="schema-snapshot-") as tmp:
        store = ClickHouseStore(f"chdb://{tmp}", DATABASE, TABLE)
        try:
            text = render(fresh_schema_document(store))
        finally:
            store.close()
    path = Path(str(resources.files("schemas") / "sql" / SNAPSHOT_FILE))
    path.write_text(text, encoding="utf-8")
    sys.stderr.write(f"wrote {path}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
