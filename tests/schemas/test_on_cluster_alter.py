"""`on_cluster` on ALTER TABLE and DELETE FROM (privacy issue: retention TTLs and erasure on a cluster): `ON CLUSTER
<name>` goes right after the table's name, where ClickHouse's grammar has it, and nothing else changes; CREATE
statements render exactly as before."""

from __future__ import annotations

import re

import pytest

from monitor.store.connection import ClickHouseStore
from schemas.ddl import REPLICA_NAME, REPLICA_PATH, migrations_table_ddl, on_cluster, render_ddl
from schemas.errors import StoreError

ALTERS = [
    "ALTER TABLE db.relevancy_scores MODIFY TTL toDateTime(event_time) + INTERVAL 30 DAY",
    "ALTER TABLE db.relevancy_scores REMOVE TTL",
    "ALTER TABLE db.relevancy_scores MODIFY COLUMN question String TTL toDateTime(event_time) + INTERVAL 7 DAY, MODIFY "
    "COLUMN response REMOVE TTL",
    "ALTER TABLE db.relevancy_scores\n    ADD COLUMN IF NOT EXISTS redactor LowCardinality(String)",
]
DELETES = [
    "DELETE FROM db.relevancy_scores WHERE conversation_id IN {conversation_ids:Array(String)} OR event_id IN "
    "{event_ids:Array(String)}",
    "DELETE FROM db.t WHERE 1",
]


def _previous_on_cluster(statement: str, cluster: str) -> str:
    """`on_cluster` as the previous release had it (CREATE only), to hold CREATE statements to byte-for-byte
    equality."""
    out = re.sub(
        r"^(CREATE (?:DATABASE|TABLE|VIEW|MATERIALIZED VIEW) IF NOT EXISTS [A-Za-z_][A-Za-z0-9_.]*)",
        rf"\1 ON CLUSTER {cluster}",
        statement,
        count=1,
    )

    def replicated(m: re.Match[str]) -> str:
        args = ", ".join(a for a in (f"'{REPLICA_PATH}'", f"'{REPLICA_NAME}'", (m.group(2) or "").strip()) if a)
        return f"ENGINE = Replicated{m.group(1)}MergeTree({args})"

    out = re.sub(r"\bENGINE = ([A-Za-z]*)MergeTree\b(?:\(([^()]*)\))?", replicated, out)
    return out.replace("non_replicated_deduplication_window", "replicated_deduplication_window")


@pytest.mark.parametrize("statement", ALTERS)
def test_alter_table_gets_on_cluster_right_after_the_table(statement: str) -> None:
    """`ALTER TABLE db.t <commands>` becomes `ALTER TABLE db.t ON CLUSTER prod <commands>`, the rest unchanged."""
    name, rest = re.match(r"^(ALTER TABLE \S+)(\s.*)$", statement, re.DOTALL).groups()  # type: ignore[union-attr]
    assert on_cluster(statement, "prod") == f"{name} ON CLUSTER prod{rest}"


@pytest.mark.parametrize("statement", DELETES)
def test_delete_from_gets_on_cluster_before_where(statement: str) -> None:
    """`DELETE FROM db.t WHERE ...` becomes `DELETE FROM db.t ON CLUSTER prod WHERE ...`, the rest unchanged."""
    assert on_cluster(statement, "prod") == statement.replace(" WHERE ", " ON CLUSTER prod WHERE ", 1)


def test_alter_and_delete_keep_their_text_past_the_table_name() -> None:
    """Only ON CLUSTER is added to an ALTER or DELETE: words that would be rewritten in a CREATE are left alone."""
    alter = "ALTER TABLE db.t MODIFY SETTING non_replicated_deduplication_window = 100"
    assert (
        on_cluster(alter, "prod")
        == "ALTER TABLE db.t ON CLUSTER prod MODIFY SETTING non_replicated_deduplication_window = 100"
    )
    delete = "DELETE FROM db.t WHERE note = 'ENGINE = MergeTree'"
    assert on_cluster(delete, "prod") == "DELETE FROM db.t ON CLUSTER prod WHERE note = 'ENGINE = MergeTree'"


def test_create_statements_render_exactly_as_before() -> None:
    """Every CREATE of the schema renders for a cluster byte for byte as the CREATE-only `on_cluster` rendered it."""
    creates = [
        st
        for st in render_ddl("relevancy", "relevancy_scores") + migrations_table_ddl("relevancy")
        if st.startswith("CREATE")
    ]
    assert len(creates) >= 10
    for statement in creates:
        assert on_cluster(statement, "prod") == _previous_on_cluster(statement, "prod")


def test_what_it_cannot_place_is_still_refused() -> None:
    """A statement already ON CLUSTER, another kind of statement, or a bad cluster name is a ValueError."""
    for statement in (
        "ALTER TABLE db.t ON CLUSTER prod REMOVE TTL",
        "DROP TABLE db.t",
        "INSERT INTO db.t VALUES (1)",
        "ALTER TABLE",
    ):
        with pytest.raises(ValueError, match="cannot place ON CLUSTER"):
            on_cluster(statement, "prod")
    with pytest.raises(ValueError, match="cluster name"):
        on_cluster("ALTER TABLE db.t REMOVE TTL", "prod; DROP")


@pytest.mark.parametrize("statement", ALTERS + DELETES)
def test_clickhouse_parses_the_rendered_statements(store: ClickHouseStore, statement: str) -> None:
    """ClickHouse's own parser (formatQuery, in chDB) accepts each rendered statement and reads `ON CLUSTER prod` in
    it; the premise: ON CLUSTER after the commands or the WHERE is a syntax error."""
    rendered = on_cluster(statement, "prod")
    formatted = str(store.query("SELECT formatQuery({q:String})", {"q": rendered}).rows[0][0])
    assert " ON CLUSTER prod" in formatted, formatted
    with pytest.raises(StoreError, match="Syntax error"):
        store.query("SELECT formatQuery({q:String})", {"q": f"{statement} ON CLUSTER prod"})
