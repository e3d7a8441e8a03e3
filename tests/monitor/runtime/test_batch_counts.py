"""A fetched batch is counted once, as its events one by one would be: consumed and not-sampled metrics, the app
label's cap, the traffic counts per segment and minute, and the offsets of events not sampled."""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from aiokafka import TopicPartition
from aiokafka.structs import ConsumerRecord

from consumers.sampling import Match, Rule, Sampler, SamplingPolicy
from monitor.config import Settings
from monitor.judges.lexical import LexicalJudge
from monitor.judging.traffic_counts import TrafficCounter, minute_number
from monitor.runtime.metrics import Metrics
from monitor.runtime.pipeline import Pipeline
from monitor.runtime.service import build_pipeline
from monitor.store.async_store import AsyncStore
from monitor.store.connection import ClickHouseStore

TS_MS = 1_795_000_000_000  # a fixed record time: the events' own timestamps span two minutes around it


def record(tp: TopicPartition, offset: int, value: bytes) -> ConsumerRecord[Any, Any]:
    """A fetched record of `tp` at `offset`."""
    return ConsumerRecord(tp.topic, tp.partition, offset, TS_MS, 0, None, value, None, 0, len(value), ())


def event(app: str, second: int, model: str = "m") -> bytes:
    """A flat event of `app` at `second` seconds past the start of the minute before TS_MS."""
    at = datetime.fromtimestamp(TS_MS // 60_000 * 60 - 60 + second, tz=UTC)
    return json.dumps(
        {
            "app": app,
            "model": model,
            "user_message": "When did order A17 ship?",
            "response": "On 3 March.",
            "timestamp": at.isoformat(),
        }
    ).encode()


def event_time(value: bytes) -> float:
    """The epoch seconds of an `event`."""
    return datetime.fromisoformat(json.loads(value)["timestamp"]).timestamp()


def pipeline(
    make_settings: Callable[..., Settings], metrics: Metrics, sampler: Sampler | None = None, **settings: Any
) -> Pipeline:
    """A pipeline that is never started: `handle_batch` needs neither Kafka nor the store."""
    s = make_settings(**settings)
    return build_pipeline(
        s,
        LexicalJudge(),
        AsyncStore(ClickHouseStore(s.store.url, s.store.database, s.store.table)),
        metrics,
        sampler=sampler,
    )


def totals(metrics: Metrics, name: str) -> dict[tuple[str, ...], float]:
    """A counter's values by label values."""
    return {
        tuple(s.labels.values()): s.value
        for m in metrics.registry.collect()
        if m.name == name
        for s in m.samples
        if s.name.endswith("_total")
    }


async def cancel_tasks(p: Pipeline) -> None:
    """Cancel what the batch started (dead letters, judge calls): these tests look at the counting only."""
    tasks = p.tasks.of()
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


async def test_a_batch_counts_as_its_events_one_by_one(make_settings: Callable[..., Settings]) -> None:
    """Consumed, not sampled (per capped app, overflow counted per event), traffic rows and offsets of a mixed batch."""
    metrics = Metrics(max_apps=2)
    p = pipeline(make_settings, metrics, sample_rate=0.0)
    tp = TopicPartition("conv", 1)
    rng = random.Random(3)
    apps = [rng.choice("ABC") for _ in range(60)]
    values = [event(app, rng.randrange(120), rng.choice("mn")) for app in apps]
    values[17] = b"not json"
    records = [record(tp, 100 + i, v) for i, v in enumerate(values)]
    p.tracker.assign([tp])
    p.handle_batch(tp, records)
    await cancel_tasks(p)

    good = [a for i, a in enumerate(apps) if i != 17]
    first_two = list(dict.fromkeys(good))[:2]
    expected = {(a,): float(sum(1 for g in good if g == a)) for a in first_two}
    expected[("other",)] = float(sum(1 for g in good if g not in first_two))
    assert totals(metrics, "relevancy_monitor_events_consumed") == {("conv",): 60.0}
    assert totals(metrics, "relevancy_monitor_events_not_sampled") == expected
    assert totals(metrics, "relevancy_monitor_metric_label_overflow") == {("app",): expected[("other",)]}
    assert p.tracker.committable() == {tp: 117}  # the dead letter holds its offset; every other event is finished

    reference = TrafficCounter()  # as each event used to count itself
    for i, v in enumerate(values):
        if i == 17:
            reference.add(TS_MS / 1000, "", "", "", "consumed")
            reference.add(TS_MS / 1000, "", "", "", "dead_lettered")
            continue
        e = json.loads(v)
        reference.add(event_time(v), e["app"], e["model"], "", "consumed")
        reference.add(event_time(v), e["app"], e["model"], "", "not_sampled")
    assert p.cost.traffic.drain() == reference.drain()
    assert len({minute_number(event_time(v)) for i, v in enumerate(values) if i != 17}) == 2  # both minutes seen


async def test_the_app_cap_admits_apps_in_the_order_the_events_came(make_settings: Callable[..., Settings]) -> None:
    """A not-sampled app seen before a sampled one takes the only label slot, as counting each event at once would."""
    metrics = Metrics(max_apps=1)
    sampler = Sampler(SamplingPolicy(default_rate=0.0, rules=[Rule(name="b", match=Match(app=["B"]), always=True)]))
    p = pipeline(make_settings, metrics, sampler)
    tp = TopicPartition("conv", 0)
    p.tracker.assign([tp])
    p.handle_batch(tp, [record(tp, 0, event("A", 1)), record(tp, 1, event("B", 2)), record(tp, 2, event("A", 3))])
    await cancel_tasks(p)
    assert totals(metrics, "relevancy_monitor_events_not_sampled") == {("A",): 2.0}
    assert totals(metrics, "relevancy_monitor_events_sampled") == {("other", "always"): 1.0}
    assert totals(metrics, "relevancy_monitor_metric_label_overflow") == {("app",): 1.0}
    assert p.tracker.committable() == {tp: 1}  # the sampled event's offset waits for its row


def test_batch_traffic_counts_add_up_like_single_adds() -> None:
    """`add_batch` (minute numbers) gives the rows `add` (epoch seconds) gives, in the order first seen."""
    rng = random.Random(5)
    single, batched = TrafficCounter(), TrafficCounter()
    batch: dict[tuple[int, str, str, str], list[int]] = {}
    fields = ("consumed", "sampled", "not_sampled", "dead_lettered")
    for _ in range(500):
        at = 1_795_000_000 + rng.uniform(0, 600)
        seg = (rng.choice("ab"), rng.choice("mn"), "")
        f = rng.randrange(4)
        single.add(at, *seg, fields[f])
        batch.setdefault((minute_number(at), *seg), [0, 0, 0, 0, 0])[f] += 1
    batched.add_batch(batch)
    assert batched.drain() == single.drain()


def test_a_kept_child_is_the_labelled_series_itself() -> None:
    """`Metrics.child` returns the same series as `labels()` would, once looked up."""
    m = Metrics()
    child = m.child(m.consumed, "t")
    assert child is m.child(m.consumed, "t") and child is m.consumed.labels("t")
    child.inc(3)
    assert totals(m, "relevancy_monitor_events_consumed") == {("t",): 3.0}
