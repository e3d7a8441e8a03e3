"""Redaction end to end, through the broker, the fake Messages API and chDB: planted personal data reaches neither
the judge nor the store, the rows count what was removed, and no log line of a full run carries a key."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from monitor.config import Settings
from monitor.devtools.localbroker import LocalBroker
from monitor.privacy.redactor import RECOGNIZERS_VERSION
from monitor.store.async_store import AsyncStore
from tests.fake_messages_api import FakeMessagesAPI
from tests.harness import RunningPipeline, all_committed, monitor_env, produce_values, wait_for
from tests.monitor.runtime.test_faults import MonitorProcess

# (kind, value): one or more formats of every kind, planted in questions, responses and metadata values.
PLANTED: list[tuple[str, str]] = [
    ("EMAIL", "maria.lopez+orders@example.org"),
    ("EMAIL", "J.SMITH@SUB.MAIL.EXAMPLE.CO.UK"),
    ("PHONE", "+44 20 7946 0958"),
    ("PHONE", "(415) 555-2671"),
    ("PHONE", "+49 30 901820"),
    ("CARD", "4539 1488 0343 6467"),
    ("CARD", "378282246310005"),
    ("CARD", "5555-5555-5555-4444"),
    ("IBAN", "DE89 3704 0044 0532 0130 00"),
    ("IBAN", "GB82WEST12345698765432"),
    ("SSN", "123-45-6789"),
    ("NATIONAL_ID", "AB 12 34 56 C"),
    ("NATIONAL_ID", "12345678Z"),
    ("IP", "203.0.113.7"),
    ("IP", "2001:db8::8a2e:370:7334"),
    ("SECRET", "sk-ant-api03-Zq8vR2mX9kLp4TnW7yB1cD5eF6gH3jK0aSdQwErTyUiO"),
    ("SECRET", "AKIAZ7Q4R2M9X3K5W8PB"),
    ("SECRET", "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ1c2VyLTQyIn0.c2lnbmF0dXJlLXBhcnQtZm9yLXRlc3Q"),
    ("URL_CREDENTIALS", "svc_user:Tr0ub4dor&3"),
]


def _events() -> tuple[list[bytes], dict[str, Counter[str]]]:
    """Flat and chat events carrying the planted items, and the counts each event's row must show."""
    values: list[bytes] = []
    expected: dict[str, Counter[str]] = {}
    for i, (kind, value) in enumerate(PLANTED):
        other_kind, other = PLANTED[(i + 7) % len(PLANTED)]
        text = f"postgres://{value}@db.internal:5432/app" if kind == "URL_CREDENTIALS" else value
        other_text = f"redis://{other}@cache:6379" if other_kind == "URL_CREDENTIALS" else other
        event_id = f"pii-{i}"
        base: dict[str, Any] = {
            "event_id": event_id,
            "conversation_id": f"c-{i}",
            "app": "support-bot",
            "timestamp": "2026-11-30T10:00:00Z",
        }
        question = f"My details are {text}; when did order A17 ship?"
        response = f"Order A17 shipped on 3 March (we have {other_text} on file)."
        if i % 2:
            record = {
                **base,
                "messages": [{"role": "user", "content": question}, {"role": "assistant", "content": response}],
            }
        else:
            record = {
                **base,
                "user_message": question,
                "response": response,
                "metadata": {"contact": text, "tier": "gold"},
            }
        values.append(json.dumps(record).encode())
        expected[event_id] = Counter({kind: 1 + (0 if i % 2 else 1)}) + Counter({other_kind: 1})
    return values, expected


async def test_planted_items_reach_neither_the_judge_nor_the_store(
    broker: LocalBroker,
    make_settings: Callable[..., Settings],
    async_store: AsyncStore,
    fake_messages_api: FakeMessagesAPI,
) -> None:
    """No planted item is in any request body the judge received or in any stored column; each row counts its items."""
    values, expected = _events()
    settings = make_settings(judge="statements", **fake_messages_api.settings_overrides())
    topic = settings.kafka.topics[0]
    await produce_values(broker.bootstrap, topic, values)
    async with RunningPipeline(settings, async_store) as run:
        await wait_for(
            lambda: all_committed(broker.bootstrap, settings.kafka.group_id, topic, len(values)),
            60,
            "every event committed",
        )
        metric_counts = {kind: run.counter("relevancy_monitor_redactions", kind=kind) for kind, _ in PLANTED}

    bodies = [
        r.raw.decode("utf-8", "replace") + json.dumps(r.body, ensure_ascii=False) for r in fake_messages_api.requests
    ]
    assert bodies  # fewer than the events: pairs identical once redacted reuse one verdict
    table = async_store.store.qualified_table
    rows = (
        await async_store.query(
            f"SELECT event_id, status, question, response, reasoning, statements, verdict_reasons, "
            "mapValues(metadata), error,"
            f" redactions, redactor FROM {table} FINAL"
        )
    ).rows
    assert len(rows) == len(values) and {r[1] for r in rows} == {"ok"}
    for kind, value in PLANTED:
        assert not any(value in b for b in bodies), f"{kind} {value!r} reached the judge"
        assert not any(value in repr(r[2:9]) for r in rows), f"{kind} {value!r} was stored"
    for r in rows:
        assert Counter(r[9]) == expected[r[0]], r[0]
        assert r[10] == RECOGNIZERS_VERSION
    assert "[CARD]" in " ".join(r[2] + r[3] for r in rows)  # the judge saw that a card was there
    totals = sum(expected.values(), Counter())
    assert metric_counts == {kind: float(totals[kind]) for kind in metric_counts}


async def test_a_known_api_key_never_appears_in_any_log_line_of_a_full_run(
    broker: LocalBroker, topic: str, tmp_path: Path, fake_messages_api: FakeMessagesAPI
) -> None:
    """`run` at debug level, with the key in the settings, in events, in metadata and in a malformed record, logs
    neither the configured key nor a pasted one."""
    configured_key = "sk-ant-api03-CONFIGUREDkeyXq7Lm2Nv8Rt4Yw1Pz6Hs3Jd9Fg5Kc0B"
    pasted_key = "sk-ant-api03-PASTEDkeyQ8wE4rT6yU2iO9pA1sD7fG3hJ5kL0zXcVbNm"
    values = [
        json.dumps({"event_id": "k1", "conversation_id": "c1", "timestamp": "2026-11-30T10:00:00Z",
                    "user_message": f"is {pasted_key} valid?", "response": f"Revoke {pasted_key} now.",
                    "metadata": {"note": pasted_key}}).encode(),
        # no assistant turn: dead letter
        json.dumps({"event_id": "k2", "messages": [{"role": "user", "content": pasted_key}]}).encode(),
        f'{{"event_id": "k3", "user_message": "{pasted_key}", "response": 42}}'.encode(),  # malformed
        f"not json at all {pasted_key}".encode(),
    ]  # fmt: skip
    env = monitor_env(
        MONITOR_KAFKA_BOOTSTRAP_SERVERS=broker.bootstrap,
        MONITOR_KAFKA_TOPICS=topic,
        MONITOR_KAFKA_GROUP_ID=f"logs-{topic}",
        MONITOR_DLQ_TOPIC=f"{topic}.dlq",
        MONITOR_CLICKHOUSE_URL=f"chdb://{tmp_path / 'ch'}",
        MONITOR_METRICS_PORT="0",
        MONITOR_LOG_FORMAT="json",
        MONITOR_LOG_LEVEL="debug",
        MONITOR_JUDGE="statements",
        MONITOR_COMMIT_INTERVAL_S="0.2",
        MONITOR_BATCH_MAX_SECONDS="0.2",
        MONITOR_KAFKA_SESSION_TIMEOUT_MS="6000",
        MONITOR_ANTHROPIC_BASE_URL=fake_messages_api.base_url,
        MONITOR_ANTHROPIC_API_KEY=configured_key,
    )
    await produce_values(broker.bootstrap, topic, values)
    mon = MonitorProcess(env)
    await mon.start()
    await asyncio.wait_for(mon.assigned.wait(), 60)

    await wait_for(
        lambda: all_committed(broker.bootstrap, f"logs-{topic}", topic, len(values)), 60, "every record committed"
    )
    assert await mon.terminate() == 0
    assert any(
        configured_key in r.headers.get("x-api-key", "") + r.headers.get("authorization", "")
        for r in fake_messages_api.requests
    )
    log = "".join(mon.lines)
    assert '"dead_lettered"' in log or "dead_letter" in log  # the malformed records were handled and logged about
    assert configured_key not in log and configured_key[-12:] not in log
    assert pasted_key not in log and pasted_key[-12:] not in log
