"""The erased ids a replay must skip: `hash_id` is the SHA-256 hex of the UTF-8 id, `ErasedIds.is_erased` matches an
event by its conversation id or its event id, and `load_erased_ids` reads back what `forget` recorded (nothing for a
store without the table); the table gets no retention TTL."""

from __future__ import annotations

import pytest

from monitor.store.connection import ClickHouseStore
from monitor.store.erased_ids import ERASED_TABLE, ErasedIds, hash_id, load_erased_ids
from monitor.store.erasure import forget
from monitor.store.migrations import Migrations
from monitor.store.retention import retention_tables
from schemas.errors import StoreError

ODD_IDS = [
    "x' OR '1'='1",
    '"}; DELETE FROM erased_ids WHERE 1 --',
    "{conversation_ids:Array(String)}",
    "Zoë — 会話 🙂",
    "a\\b\nc\t\x00",
]


def test_hash_id_is_the_lowercase_hex_sha256_of_the_utf8_id() -> None:
    """The NIST test vector for "abc", and a non-ASCII id hashed from its UTF-8 bytes."""
    assert hash_id("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    assert (
        hash_id("\u00e9") == "4a99557e4033c3539de2eb65472017cad5f9557f7a0625a09f1c3f6e2ba69c4c"
    )  # sha256 of the bytes c3 a9
    assert hash_id("e\u0301") != hash_id("\u00e9")  # not normalized: the id as the events carry it


def test_is_erased_matches_by_either_id_and_never_across_kinds() -> None:
    """An event is erased by its conversation id or its event id, never across kinds; an empty set erases nothing."""
    erased = ErasedIds(conversations=frozenset({hash_id("c1")}), events=frozenset({hash_id("e1")}))
    assert erased.is_erased("c1", "other") and erased.is_erased("other", "e1") and erased.is_erased("c1", "e1")
    assert not erased.is_erased("other", "other") and not erased.is_erased("e1", "c1")
    assert len(erased) == 2
    assert len(ErasedIds()) == 0 and not ErasedIds().is_erased("c1", "e1")


def test_load_erased_ids_round_trips_what_forget_recorded(store: ClickHouseStore) -> None:
    """The hashes forget recorded load back by kind; the same ids forgotten again, or a dry run, add nothing."""
    assert len(load_erased_ids(store)) == 0
    forget(store, ["c1", "c2"], ["e1"])
    forget(store, ["c1"], ["e1"])
    forget(store, ["c3"], ["e3"], dry_run=True)
    erased = load_erased_ids(store)
    assert erased == ErasedIds(
        conversations=frozenset({hash_id("c1"), hash_id("c2")}), events=frozenset({hash_id("e1")})
    )
    assert len(erased) == 3 and erased.is_erased("c2", "new") and not erased.is_erased("c3", "e3")


@pytest.mark.parametrize("odd", ODD_IDS)
def test_an_id_with_quotes_sql_or_unicode_is_recorded_and_found(store: ClickHouseStore, odd: str) -> None:
    """An id with quotes, SQL, parameter syntax, non-ASCII or control characters is recorded and matches itself only."""
    forget(store, [odd], [odd + "!"])
    erased = load_erased_ids(store)
    assert erased.conversations == {hash_id(odd)} and erased.events == {hash_id(odd + "!")}
    assert erased.is_erased(odd, "other") and erased.is_erased("other", odd + "!")
    assert not erased.is_erased("other", odd) and not erased.is_erased(odd + " ", "x")


def test_a_store_without_the_table_has_erased_nothing(store: ClickHouseStore) -> None:
    """A store before migration 039 (no erased_ids table) loads as no erased id, not an error."""
    store.command(f"DROP TABLE {store.database}.{ERASED_TABLE}")
    assert load_erased_ids(store) == ErasedIds()


def test_with_a_cluster_every_shard_is_read(store: ClickHouseStore) -> None:
    """With a cluster the load reads `cluster('prod', db.erased_ids)` (every shard); chDB's refusal names the
    cluster."""
    clustered = ClickHouseStore(store.url, store.database, store.table, cluster="prod")
    with pytest.raises(StoreError, match="prod"):
        load_erased_ids(clustered)


def test_the_erased_ids_get_no_retention_ttl(clickhouse_url: str, database: str) -> None:
    """With a 1-day retention the scores table gets its TTL and erased_ids none: it must outlive the topics' history."""
    s = ClickHouseStore(clickhouse_url, database, "relevancy_scores")
    Migrations(s, retention_days=1).migrate()
    try:
        ddl = dict(
            s.query(
                "SELECT name, create_table_query FROM system.tables WHERE database = {d:String}", {"d": database}
            ).rows
        )
        assert "TTL" in ddl["relevancy_scores"] and "TTL" not in ddl[ERASED_TABLE]
        assert ERASED_TABLE not in retention_tables("relevancy_scores")
    finally:
        s.command(f"DROP DATABASE IF EXISTS {database} SYNC")
