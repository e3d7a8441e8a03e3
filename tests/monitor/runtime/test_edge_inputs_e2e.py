"""Inputs at the edges, end to end through a real tansu broker and chDB: each record ends as a row or a dead
letter with its reason, and the group's committed offsets reach the end of every partition (nothing stalls)."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from consumers.deadletter import H_DETAIL, H_ORIGINAL_BYTES, H_REASON
from monitor.config import Settings
from monitor.devtools.localbroker import LocalBroker
from monitor.store.async_store import AsyncStore
from schemas.scored import MAX_STORED_STATEMENTS
from tests.harness import RunningPipeline, committed_offsets, produce_values, read_all, wait_for

LIMIT = 1_000_000  # the default MONITOR_MAX_EVENT_BYTES
TS = "2026-11-29T09:00:00Z"


def event(
    event_id: str, question: str = "When did order A17 ship?", response: str = "Order A17 shipped.", **extra: object
) -> str:
    """A flat event as JSON text (ASCII: non-ASCII and lone surrogates are written as \\u escapes)."""
    return json.dumps({"event_id": event_id, "user_message": question, "response": response, "timestamp": TS, **extra})


def sized(event_id: str, n_bytes: int) -> bytes:
    """A relevant flat event padded to exactly `n_bytes` with a long answer."""
    head = event(event_id, response="Order A17 shipped. ")
    return head.replace('shipped. "', "shipped. " + "x" * (n_bytes - len(head)) + '"', 1).encode()


def nested(depth: int) -> str:
    """An event whose metadata value is `depth` objects deep."""
    inner = '{"a": ' * depth + "1" + "}" * depth
    return event("deep").replace('"timestamp"', f'"metadata": {{"k": {inner}}}, "timestamp"', 1)


def records() -> dict[str, bytes]:
    """The edge records by name (also their Kafka key)."""
    future = (datetime.now(UTC) + timedelta(hours=5)).isoformat()
    return {
        "nul_text": event(
            "nul", "When did order\u0000 A17 ship?", "Order A17\u0000 shipped.", metadata={"note": "a\u0000b"}
        ).encode(),
        "surrogate_text": event(
            "sur", "When did order A17 ship?\ud800", "Order A17 shipped.\udc00", metadata={"note": "x\ud800"}
        ).encode(),
        "surrogate_id": event("id-\ud800").encode(),
        "nul_app": event("nul-app", app="support\u0000bot").encode(),
        "surrogate_metadata_key": event("sur-key", metadata={"k\udfff": "v"}).encode(),
        "raw_nul_byte": b'{"event_id": "raw", "user_message": "q\x00", "response": "a"}',
        "rtl_zero_width": event("rtl", "\u200fמתי נשלחה ההזמנה?", "\u200fההז\u200bמנה בדרך אליך.").encode(),
        "at_limit": sized("at-limit", LIMIT),
        "over_limit": sized("over-limit", LIMIT + 1),
        "many_sentences": event("many", "Is word0 there?", " ".join(f"word{i % 10}." for i in range(100_000))).encode(),
        "deep_metadata": nested(10_000).encode(),
        "future": event("future").replace(TS, future).encode(),
        "duplicate_key": b'{"event_id": "dup", "user_message": "q", "response": "a", "response": "b", "timestamp": "'
        + TS.encode()
        + b'"}',
    }


# name -> event id of its row
ROWS = {
    "nul_text": "nul",
    "surrogate_text": "sur",
    "rtl_zero_width": "rtl",
    "at_limit": "at-limit",
    "many_sentences": "many",
}
# name -> (reason, part of the detail)
DEAD = {
    "surrogate_id": ("invalid_event", "event_id"),
    "nul_app": ("invalid_event", "app"),
    "surrogate_metadata_key": ("invalid_event", "metadata"),
    "raw_nul_byte": ("invalid_json", "control character"),
    "over_limit": ("oversized", f"limit {LIMIT}"),
    "deep_metadata": ("invalid_json", "nested"),
    "future": ("invalid_event", "ahead"),
    "duplicate_key": ("invalid_json", '"response"'),
}


async def test_edge_inputs_end_as_rows_or_dead_letters_and_offsets_reach_the_end(
    broker: LocalBroker, make_settings: Callable[..., Settings], async_store: AsyncStore
) -> None:
    """NUL, lone surrogates, RTL and zero-width text, 1 MB answers, 100k sentences, deep nesting, a future clock
    and duplicate keys: each is a row or a dead letter with its reason, and every partition is committed to its end."""
    settings = make_settings()
    values = records()
    assert set(values) == set(ROWS) | set(DEAD)
    names = list(values)
    total = await produce_values(
        broker.bootstrap, settings.kafka.topics[0], values.values(), key=lambda i: names[i].encode()
    )

    async def drained() -> bool:
        committed = await committed_offsets(broker.bootstrap, settings.kafka.group_id, settings.kafka.topics[0])
        return sum(v or 0 for v in committed.values()) == total

    async with RunningPipeline(settings, async_store):
        await wait_for(drained, 30, f"{total} offsets committed")

    t = async_store.store.qualified_table
    got = {
        r[0]: r[1:]
        for r in (
            await async_store.query(
                f"SELECT event_id, status, score, question, response, metadata, n_statements, length(statements), "
                f"isValidUTF8(question) AND isValidUTF8(response) AND arrayAll(s -> isValidUTF8(s), statements) FROM "
                f"{t} FINAL"
            )
        ).rows
    }
    assert sorted(got) == sorted(ROWS.values())
    assert all(status == "ok" and valid for status, *_, valid in got.values())
    assert got["nul"][2:5] == (
        "When did order\u0000 A17 ship?",
        "Order A17\u0000 shipped.",
        {"note": "a\u0000b"},
    )  # kept byte for byte
    assert got["sur"][2:5] == (
        "When did order A17 ship?\ufffd",
        "Order A17 shipped.\ufffd",
        {"note": "x\ufffd"},
    )  # visibly replaced
    assert got["rtl"][1] == 1.0  # its one shared word matched despite the direction marks and a zero-width space in it
    assert len(got["at-limit"][3]) == len(
        json.loads(values["at_limit"])["response"]
    )  # stored whole; the judge saw it truncated
    n_statements, stored = got["many"][5:7]
    assert n_statements > MAX_STORED_STATEMENTS and stored == MAX_STORED_STATEMENTS  # truthful count, capped arrays

    dead = {r.key.decode(): r for r in await read_all(broker.bootstrap, settings.kafka.dlq_topic, len(DEAD))}
    assert sorted(dead) == sorted(DEAD)
    for name, (reason, detail_part) in DEAD.items():
        headers = dict(dead[name].headers)
        assert headers[H_REASON].decode() == reason, name
        assert detail_part in headers[H_DETAIL].decode(), (name, headers[H_DETAIL])
    assert (
        dict(dead["over_limit"].headers)[H_ORIGINAL_BYTES] == str(LIMIT + 1).encode()
    )  # cut to fit the producer, size kept
