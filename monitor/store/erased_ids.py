"""What `relevancy-monitor forget` erased, kept so that nothing scores it again: `{database}.erased_ids` (migration
039) holds the SHA-256 (hex, lowercase, of the UTF-8 id) of every conversation id and event id erased, never the id.
A replay re-reads the topics' history, which still holds an erased person's events until the topic's own retention
drops them: it loads the table once (`load_erased_ids`) and skips every event for which `ErasedIds.is_erased`.

The table has no retention TTL, on purpose: it must outlive the topics' retention (a replay may read a topic kept
longer than the scores), so `monitor.store.retention` does not manage it. Its rows are hashes and times only.

Loading reads the whole table into memory, assuming erasures are rare (a handful of ids per data-subject request):
each id costs about 150 bytes in Python (a 64-character hex str of 113 bytes plus its set slot), so a million erased
ids take about 150 MB."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from schemas.errors import StoreError

if TYPE_CHECKING:
    from monitor.store.connection import ClickHouseStore

ERASED_TABLE = "erased_ids"
CONVERSATION = "conversation"
EVENT = "event"
ERASED_COLUMNS = ("kind", "id_sha256", "erased_at")
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_EXISTING = "SELECT name FROM system.tables WHERE database = {database:String} AND name = {table:String}"


def hash_id(value: str) -> str:
    """The SHA-256 of `value`'s UTF-8 bytes, hex (lowercase): how an erased id is kept and looked up."""
    return hashlib.sha256(value.encode("utf-8")).hexdigest()


@dataclass(frozen=True, slots=True)
class ErasedIds:
    """The hashes of the erased conversation ids and event ids (see `hash_id`); pure, no I/O."""

    conversations: frozenset[str] = frozenset()
    events: frozenset[str] = frozenset()

    def is_erased(self, conversation_id: str, event_id: str) -> bool:
        """Whether an event was erased: its conversation id or its event id is among the erased ones."""
        if not self.conversations and not self.events:  # the usual case: no hashing per event
            return False
        return hash_id(conversation_id) in self.conversations or hash_id(event_id) in self.events

    def __len__(self) -> int:
        return len(self.conversations) + len(self.events)


def _exists(store: ClickHouseStore) -> bool:
    return bool(store.query(_EXISTING, {"database": store.database, "table": ERASED_TABLE}).rows)


def _source(store: ClickHouseStore) -> str:
    # With a cluster the table is replicated within a shard only (its replica path holds {shard}), and a `forget`
    # inserts on whichever node it reached: read every shard.
    table = f"{store.database}.{ERASED_TABLE}"
    if store.cluster is None:
        return table
    if not _IDENT.match(store.cluster):
        raise ValueError(f"cluster name {store.cluster!r} is not a plain identifier")
    return f"cluster('{store.cluster}', {table})"


def load_erased_ids(store: ClickHouseStore) -> ErasedIds:
    """Every erased id's hash from an open store (the whole table, see the module's docstring); empty when the
    table does not exist (a store before migration 039, where nothing was recorded). Raises `StoreError`."""
    if not _exists(store):
        return ErasedIds()
    # toString: clickhouse-connect returns a FixedString as bytes.
    rows = store.query(f"SELECT DISTINCT kind, toString(id_sha256) FROM {_source(store)}").rows
    return ErasedIds(
        conversations=frozenset(str(h) for kind, h in rows if kind == CONVERSATION),
        events=frozenset(str(h) for kind, h in rows if kind == EVENT),
    )


def was_erased(store: ClickHouseStore, conversation_id: str, event_id: str) -> bool:
    """Whether one event was erased (its conversation id or its event id), by one query for its two hashes: for
    reading a single answer back from Kafka, where loading the whole table would be waste. Raises `StoreError`."""
    if not _exists(store):
        return False
    rows = store.query(
        f"SELECT count() FROM {_source(store)} WHERE (kind = {{conversation:String}} AND id_sha256 = {{c:String}}) "
        "OR (kind = {event:String} AND id_sha256 = {e:String})",
        {"conversation": CONVERSATION, "event": EVENT, "c": hash_id(conversation_id), "e": hash_id(event_id)},
    ).rows
    return bool(rows and rows[0][0])


def record_erased(
    store: ClickHouseStore, conversation_ids: Iterable[str], event_ids: Iterable[str], at: datetime
) -> int:
    """Insert the hashes of `conversation_ids` and `event_ids` (erased at `at`) into `erased_ids`; returns how many
    ids were recorded. Raises `StoreError`, naming the remedy, when the table does not exist (migration 039)."""
    rows = [(CONVERSATION, hash_id(i), at) for i in dict.fromkeys(conversation_ids)]
    rows += [(EVENT, hash_id(i), at) for i in dict.fromkeys(event_ids)]
    if not rows:
        return 0
    if not _exists(store):
        raise StoreError(
            f"{store.database}.{ERASED_TABLE} not found (a schema before migration 039): run `relevancy-monitor "
            "migrate` first, "
            "so that a replay never scores the erased ids again; nothing was deleted"
        )
    # A plain insert, with a cluster too: the DDL made the table Replicated, so the shard's replicas get it.
    store.insert_table(ERASED_TABLE, ERASED_COLUMNS, rows)
    return len(rows)
