"""The shipped traffic-weighted mean query recovers the true mean of a stream sampled at uneven rates."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from pathlib import Path

from consumers.sampling import Match, Rule, Sampler, SamplingPolicy
from monitor.store.connection import ClickHouseStore
from schemas.events import ConversationEvent, KafkaPosition
from schemas.scored import ScoredRow

QUERY = Path(__file__).resolve().parents[3] / "queries" / "traffic_weighted_mean.sql"
T0 = datetime.now(UTC).replace(microsecond=0) - timedelta(hours=2)  # inside the query's last-24-hours window


def test_weighted_mean_matches_the_true_mean(store: ClickHouseStore) -> None:
    """The traffic-weighted mean query recovers the true mean where the unweighted mean is biased."""
    rng = random.Random(3)
    policy = SamplingPolicy(
        default_rate=1.0,
        rules=[
            Rule(name="big", match=Match(app=["big"]), rate=0.03),
            Rule(name="mid", match=Match(app=["mid"]), rate=0.3),
        ],
    )
    sampler = Sampler(policy)
    # segment sizes and score levels differ, so an unweighted mean over judged rows is biased towards small apps
    segments = {"big": (30_000, 0.9), "mid": (5_000, 0.6), "small": (800, 0.2)}
    scores_all: list[float] = []
    rows: list[ScoredRow] = []
    for app, (n, level) in segments.items():
        for i in range(n):
            score = min(1.0, max(0.0, rng.gauss(level, 0.1)))
            scores_all.append(score)
            event = ConversationEvent(
                event_id=f"{app}-{i}",
                conversation_id=f"{app}-c{i}",
                event_time=T0 + timedelta(seconds=i % 3000),
                app="all",
                model="m",
                prompt_version="v",
                metadata={},
                question="q",
                response="r",
                shape="flat",
                source=KafkaPosition(topic="t", partition=0, offset=i),
            )
            d = sampler.decide(event.model_copy(update={"app": app}))
            if d.sampled:
                rows.append(
                    ScoredRow(
                        event_id=event.event_id,
                        conversation_id=event.conversation_id,
                        event_time=event.event_time,
                        app="all",
                        model="m",
                        prompt_version="v",
                        judge="lexical",
                        judge_model="h",
                        judge_id="j",
                        status="ok",
                        score=score,
                        raw_score=score,
                        sample_rate=d.rate,
                        sample_rule=d.rule,
                        scored_at=T0,
                    )
                )
    store.insert_rows(rows, "weighted-mean")
    true_mean = sum(scores_all) / len(scores_all)
    sql = QUERY.read_text().replace("{table}", store.qualified_table)
    result = store.query(sql)
    got = dict(zip(result.columns, result.rows[0], strict=True))
    naive = sum(r.score or 0 for r in rows) / len(rows)
    assert abs(naive - true_mean) > 0.05  # the stream really is biased when unweighted...
    assert abs(got["traffic_weighted_mean"] - true_mean) < 0.01  # ...and the weights undo it
    assert got["judged"] == len(rows)
    assert abs(got["estimated_events"] - len(scores_all)) / len(scores_all) < 0.05
