"""The ClickHouse DDL, as versioned .sql files applied in name order. Every statement is idempotent."""

from __future__ import annotations

import re
from importlib import resources

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


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
        statements.append(body.format(**names))
    return statements
