"""End to end through a real tansu broker and chDB: rows, dead letters, offsets, restarts, sampling, errors."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable

import pytest

from consumers.deadletter import H_OFFSET, H_REASON, H_TOPIC
from consumers.sampling import sample_point
from monitor.config import Settings
from monitor.devtools.localbroker import LocalBroker
from monitor.devtools.traffic import generate_events
from monitor.judges.base import JudgeInfo, Judgement
from monitor.judges.lexical import LexicalJudge
from monitor.runtime.scorer import Job
from monitor.store.async_store import AsyncStore
from schemas.errors import JudgeUnavailable
from tests.conftest import EXAMPLES
from tests.harness import RunningPipeline, committed_offsets, count_rows, produce_values, read_all, wait_for

FLAT = (EXAMPLES / "events-flat.jsonl").read_bytes().splitlines()
CHAT = (EXAMPLES / "events-chat.jsonl").read_bytes().splitlines()
MALFORMED = (EXAMPLES / "events-malformed.txt").read_bytes().splitlines()


async def drained(run: RunningPipeline, bootstrap: str, settings: Settings, total: int) -> None:
    """Wait until every produced record is committed by the group."""

    async def done() -> bool:
        committed = await committed_offsets(bootstrap, settings.kafka.group_id, settings.kafka.topics[0])
        return sum(v or 0 for v in committed.values()) == total

    await wait_for(done, 60, f"{total} offsets committed")


async def test_end_to_end_rows_dead_letters_and_offsets(
    broker: LocalBroker, make_settings: Callable[..., Settings], async_store: AsyncStore
) -> None:
    """Good events become one row each at their Kafka position; bad ones are dead-lettered with a reason."""
    settings = make_settings(max_event_bytes=100_000)
    generated = list(generate_events(150, seed=1, malformed_share=0.0))
    oversized = json.dumps({"user_message": "q", "response": "x" * 200_000}).encode()
    values: list[bytes | None] = [*FLAT, *CHAT, *MALFORMED, None, oversized, *generated]
    total = await produce_values(broker.bootstrap, settings.kafka.topics[0], values, key=lambda i: f"k{i}".encode())
    good = len(FLAT) + len(CHAT) + len(generated)
    bad = len(MALFORMED) + 2

    async with RunningPipeline(settings, async_store) as run:
        await wait_for(lambda: _rows_at_least(async_store, good), 60, f"{good} rows")
        await drained(run, broker.bootstrap, settings, total)

    assert await count_rows(async_store) == good
    assert await count_rows(async_store, final=False) == good  # nothing written twice
    t = async_store.store.qualified_table
    padded = (
        await async_store.query(
            f"SELECT score, raw_score, n_statements, statements, verdicts, judge, judge_model, status, app, model, "
            "prompt_version, "
            f"metadata, kafka_topic, sample_rate, question FROM {t} FINAL WHERE event_id = "
            "'9f1c2a70-0002-4c1e-9a53-000000000002'"
        )
    ).rows[0]
    assert abs(padded[0] - 1 / 3) < 1e-9 and abs(padded[1] - 1 / 3) < 1e-9
    assert padded[2] == 3 and padded[3][2] == "Order A17 shipped on 3 March." and padded[4] == ["no", "no", "yes"]
    assert padded[5:11] == ("lexical", "heuristic", "ok", "support-bot", "assistant-large", "v13")
    assert padded[11] == {"locale": "en-GB", "channel": "app"}
    assert padded[12:15] == (settings.kafka.topics[0], 1.0, "When did order A17 ship?")
    tight = (
        await async_store.query(f"SELECT score FROM {t} FINAL WHERE event_id = '9f1c2a70-0001-4c1e-9a53-000000000001'")
    ).rows[0][0]
    assert tight == 1.0
    chat = (
        await async_store.query(
            f"SELECT question FROM {t} FINAL WHERE event_id = '7d2e0b11-0001-4f7a-8c11-000000000011'"
        )
    ).rows[0][0]
    assert chat == "Order B42. What is the return window?"
    # one row per event, each at its own Kafka position
    positions = (
        await async_store.query(f"SELECT uniqExact(kafka_partition, kafka_offset), uniqExact(event_id) FROM {t}")
    ).rows[0]
    assert positions == (good, good)

    dead = await read_all(broker.bootstrap, settings.kafka.dlq_topic, bad)
    assert len(dead) == bad
    reasons = sorted(dict(r.headers)[H_REASON].decode() for r in dead)
    assert reasons == sorted(
        [
            "invalid_json",
            "invalid_event",
            "invalid_event",
            "no_judgeable_pair",
            "not_object",
            "empty_value",
            "oversized",
        ]
    )
    by_value = {r.value: r for r in dead}
    for value in MALFORMED:
        assert dict(by_value[value].headers)[H_TOPIC].decode() == settings.kafka.topics[0]  # original bytes kept
    assert all(int(dict(r.headers)[H_OFFSET]) >= 0 for r in dead)
    assert run.counter("relevancy_monitor_events_consumed") == total
    assert run.counter("relevancy_monitor_events_dead_lettered") == bad
    assert run.counter("relevancy_monitor_events_judged", status="ok") == good


async def _rows_at_least(store: AsyncStore, n: int) -> bool:
    return await count_rows(store, final=False) >= n


@pytest.mark.long(seconds=19)
async def test_restart_and_full_redelivery_do_not_duplicate(
    broker: LocalBroker, make_settings: Callable[..., Settings], async_store: AsyncStore
) -> None:
    """A restart consumes only new events, and a replay by a new group leaves one row per event under FINAL."""
    settings = make_settings()
    first = list(generate_events(80, seed=2, malformed_share=0.0))
    await produce_values(broker.bootstrap, settings.kafka.topics[0], first)
    async with RunningPipeline(settings, async_store) as run:
        await drained(run, broker.bootstrap, settings, 80)

    # same group, more events: only the new ones are consumed
    more = list(generate_events(20, seed=3, malformed_share=0.0))
    await produce_values(broker.bootstrap, settings.kafka.topics[0], more)
    async with RunningPipeline(settings, async_store) as run:
        await drained(run, broker.bootstrap, settings, 100)
    assert run.counter("relevancy_monitor_events_consumed") == 20
    assert await count_rows(async_store) == 100

    # a new group re-reads everything (a replay): FINAL still has one row per event
    replay = make_settings(kafka_group_id=settings.kafka.group_id + "-replay")
    async with RunningPipeline(replay, async_store) as run:
        await drained(run, broker.bootstrap, replay, 100)
    assert await count_rows(async_store, final=False) == 200
    assert await count_rows(async_store) == 100


async def test_sampling_judges_whole_conversations_and_commits_the_rest(
    broker: LocalBroker, make_settings: Callable[..., Settings], async_store: AsyncStore
) -> None:
    """Sampling judges whole conversations at the recorded rate and still commits the events it skips."""
    settings = make_settings(sample_rate=0.3)
    events = [
        json.dumps(
            {
                "event_id": f"e{i}",
                "conversation_id": f"c{i % 60}",
                "user_message": "When did order A17 ship?",
                "response": "Order A17 shipped.",
                "timestamp": "2026-11-29T09:00:00Z",
            }
        ).encode()
        for i in range(300)
    ]
    await produce_values(broker.bootstrap, settings.kafka.topics[0], events)
    async with RunningPipeline(settings, async_store) as run:
        await drained(run, broker.bootstrap, settings, 300)
    expected = {f"c{c}" for c in range(60) if sample_point(f"c{c}") < 0.3}
    got = (
        await async_store.query(
            f"SELECT conversation_id, count(), any(sample_rate), any(sample_rule) FROM "
            f"{async_store.store.qualified_table} FINAL "
            "GROUP BY conversation_id"
        )
    ).rows
    assert {r[0] for r in got} == expected
    assert all(r[1] == 5 and r[2] == 0.3 and r[3] == "base" for r in got)
    assert run.counter("relevancy_monitor_events_not_sampled") == 300 - 5 * len(expected)


class ScriptedJudge:
    """A judge double (our own interface, not the SDK): fails, hangs or is slow by question text."""

    def __init__(self, delay_s: float = 0.0) -> None:
        """A judge double that waits `delay_s` per call and tracks its peak concurrency."""
        self.info = JudgeInfo(method="scripted", model="none", judge_id="scripted-1")
        self.delay_s = delay_s
        self.active = 0
        self.peak = 0
        self._lexical = LexicalJudge()
        self.stats: dict[str, int] = {}
        self.rate_limited = 0

    async def judge(self, question: str, response: str, **_context: object) -> Judgement:
        """Fail, hang or crash when the question says so; otherwise score lexically after `delay_s`."""
        self.active += 1
        self.peak = max(self.peak, self.active)
        try:
            if "FAIL" in question:
                raise JudgeUnavailable("judge API kept returning 529")
            if "HANG" in question:
                await asyncio.sleep(3600)
            if "CRASH" in question:
                raise RuntimeError("bug in a judge")
            await asyncio.sleep(self.delay_s)
            return await self._lexical.judge(question, response)
        finally:
            self.active -= 1

    async def aclose(self) -> None:
        """Nothing to close."""
        pass


async def test_judge_failures_become_error_rows_never_scores(
    broker: LocalBroker, make_settings: Callable[..., Settings], async_store: AsyncStore
) -> None:
    """Unavailable, timed-out and crashing judge calls become error rows without a score; others score ok."""
    settings = make_settings(judge_timeout_s=0.5)
    questions = ["When did order A17 ship? FAIL", "Is it HANG time?", "CRASH now?", "When did order A17 ship?"]
    values = [
        json.dumps(
            {
                "event_id": f"e{i}",
                "user_message": q,
                "response": "Order A17 shipped.",
                "timestamp": "2026-11-29T09:00:00Z",
            }
        ).encode()
        for i, q in enumerate(questions)
    ]
    await produce_values(broker.bootstrap, settings.kafka.topics[0], values)
    async with RunningPipeline(settings, async_store, judge=ScriptedJudge()) as run:
        await drained(run, broker.bootstrap, settings, 4)
    got = {
        r[0]: r[1:]
        for r in (
            await async_store.query(
                f"SELECT event_id, status, score, error, judge_id FROM {async_store.store.qualified_table} FINAL"
            )
        ).rows
    }
    assert got["e0"][:2] == ("error", None) and got["e0"][2].startswith("unavailable: judge API kept returning 529")
    assert got["e1"][:2] == ("error", None) and got["e1"][2].startswith("timeout")
    assert got["e2"][:2] == ("error", None) and got["e2"][2].startswith("internal")
    assert got["e3"][:2] == ("ok", 1.0)
    assert {g[3] for g in got.values()} == {"scripted-1"}
    assert run.counter("relevancy_monitor_judge_errors") == 3


async def test_in_flight_is_bounded_and_concurrency_respected(
    broker: LocalBroker, make_settings: Callable[..., Settings], async_store: AsyncStore
) -> None:
    """In-flight events stay under the cap plus one fetch, and judge calls under judge_concurrency."""
    settings = make_settings(max_in_flight=30, resume_in_flight=10, kafka_max_poll_records=10, judge_concurrency=3)
    judge = ScriptedJudge(delay_s=0.01)
    n = 400
    await produce_values(broker.bootstrap, settings.kafka.topics[0], generate_events(n, seed=4, malformed_share=0.0))
    peak = 0
    async with RunningPipeline(settings, async_store, judge=judge) as run:

        async def watch() -> bool:
            nonlocal peak
            peak = max(peak, run.pipeline.tracker.in_flight())
            return await count_rows(async_store, final=False) >= n

        await wait_for(watch, 90, f"{n} rows")
    assert judge.peak <= 3
    assert peak <= 30 + 10  # the cap plus at most one fetch
    assert run.metrics.paused._value.get() in (0.0, 1.0)
    assert await count_rows(async_store) == n


async def test_a_leader_cancelled_before_it_ran_releases_its_followers(
    make_settings: Callable[..., Settings], async_store: AsyncStore
) -> None:
    """A leader cancelled before it ran releases its follower, which judges the event itself."""
    from aiokafka import TopicPartition

    from consumers.decode import decode_event
    from consumers.sampling import DecisionKind, SampleDecision
    from monitor.judging.verdict_reuse import cache_key
    from schemas.events import KafkaPosition

    run = RunningPipeline(make_settings(), async_store)  # not started: no Kafka I/O, only the judging machinery
    p = run.pipeline
    tp = TopicPartition("t", 0)
    p.tracker.assign([tp])
    event = p.scorer.redact(
        decode_event(FLAT[0], position=KafkaPosition(topic="t", partition=0, offset=0), record_timestamp_ms=0)
    )
    decision = SampleDecision(True, 1.0, DecisionKind.BASE)
    judged = event.judged
    key = cache_key(
        p.guard.judge.info.judge_id, judged.question, judged.response, context=judged.context, system=judged.system
    )
    leader = p.scorer.lead(Job.of(p.guard, event, decision, p.tracker.track(tp, 0)))
    verdict = p.scorer.reuse.leader(key)
    assert verdict is not None
    follower = asyncio.create_task(p.scorer.follow(Job.of(p.guard, event, decision, p.tracker.track(tp, 1)), verdict))
    leader.cancel()  # revoked before it ever ran: its body (and any `finally`) never executes
    await asyncio.gather(leader, return_exceptions=True)
    await asyncio.wait_for(follower, 5)  # not stuck on a verdict that will never come
    await asyncio.wait_for(asyncio.gather(*p.tasks.of()), 5)  # the follower's own judging
    assert (
        len(p.sink) == 1 and p.scorer.reuse.leader(key) is None
    )  # the follower judged its event; nothing left registered
    await p.source.consumer.stop()
    await p.producer.stop()


async def _until(condition: Callable[[], bool], timeout_s: float = 5.0) -> None:
    """Yield to the loop until `condition()` holds (a few ticks, not a fixed sleep); fail after `timeout_s`."""
    await wait_for(lambda: asyncio.sleep(0, result=condition()), timeout_s, "the condition")


async def test_a_probe_cancelled_mid_call_does_not_wedge_the_circuit(
    make_settings: Callable[..., Settings], async_store: AsyncStore
) -> None:
    """A probe cancelled mid-call lets the next event probe, succeed and close the circuit."""
    from aiokafka import TopicPartition

    from consumers.decode import decode_event
    from consumers.sampling import DecisionKind, SampleDecision
    from schemas.events import KafkaPosition

    class FirstCallHangs(ScriptedJudge):
        calls = 0

        async def judge(self, question: str, response: str, **_context: object) -> Judgement:
            FirstCallHangs.calls += 1
            if FirstCallHangs.calls == 1:
                await asyncio.sleep(3600)
            return await super().judge(question, response)

    run = RunningPipeline(
        make_settings(breaker_threshold=1, breaker_cooldown_s=0.05, cache_max_entries=0),
        async_store,
        judge=FirstCallHangs(),
    )
    p = run.pipeline
    tp = TopicPartition("t", 0)
    p.tracker.assign([tp])
    p.guard.breaker.on_failure()  # the judge has been failing: the circuit is open
    decision = SampleDecision(True, 1.0, DecisionKind.BASE)
    events = [
        p.scorer.redact(
            decode_event(v, position=KafkaPosition(topic="t", partition=0, offset=i), record_timestamp_ms=0)
        )
        for i, v in enumerate(FLAT[:2])
    ]
    probe = p.scorer.lead(Job(p.guard, events[0], decision, p.tracker.track(tp, 0), b"k0"))
    await _until(lambda: FirstCallHangs.calls == 1)  # the first task took the probe and hangs in the judge
    waiting = p.scorer.lead(Job(p.guard, events[1], decision, p.tracker.track(tp, 1), b"k1"))
    await asyncio.sleep(0.2)
    assert not waiting.done()
    probe.cancel()  # e.g. its partition's drain deadline passed
    await asyncio.gather(probe, return_exceptions=True)
    await asyncio.wait_for(waiting, 5)  # the next event probes, succeeds and closes the circuit
    assert not p.guard.breaker.is_open and len(p.sink) == 1
    await p.source.consumer.stop()
    await p.producer.stop()


async def test_finishing_partitions_is_bounded_when_the_commit_never_answers(
    make_settings: Callable[..., Settings], async_store: AsyncStore
) -> None:
    """With the group coordinator gone a commit can wait out aiokafka's retries: `finish` gives it what is left of
    its deadline and returns, leaving the offsets uncommitted (their events are redelivered)."""
    from aiokafka import TopicPartition

    from monitor.runtime.partition_tasks import Deadline

    run = RunningPipeline(make_settings(), async_store)
    p = run.pipeline
    tp = TopicPartition("t", 0)
    p.tracker.assign([tp])
    p.tracker.done(p.tracker.track(tp, 0))
    hung = asyncio.Event()

    async def never(offsets: dict[TopicPartition, int]) -> dict[TopicPartition, int]:
        hung.set()
        await asyncio.sleep(3600)
        return offsets

    p.source.commit = never  # type: ignore[method-assign]
    try:
        left = await asyncio.wait_for(p.finish({tp}, Deadline(0.5), phase="shutdown"), 10)
    finally:
        await p.source.consumer.stop()
        await p.producer.stop()
    assert hung.is_set() and left == 0
