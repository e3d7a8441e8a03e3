"""How well each judge predicts users' verdicts, per segment and ISO week of the feedback: the AUC of its score for
telling liked from disliked answers (thumbs) and Spearman's ρ against ratings, with their intervals and counts.

Each feedback row of [start, end) (`feedback FINAL`) whose answer was found (an event id, not `unresolved`) is paired
with every judge's primary live row of that answer in `relevancy_scores` FINAL: status ok, not a shadow judge's
(`shadow:` rules), not a replay's (`replay_run`), and not a feedback-triggered judgement (sample_rule `feedback`:
those were chosen because users disliked the answer, so they would flatter the AUC). A judge's latest score of the
answer counts when it has more than one. The segment is the judged row's (the answer's own), so feedback that named
only its app still lands in the answer's full segment. Ratings count on their scale mapped to 0..1, so scales mix.

Besides each segment and week, the same figures for the whole range (`week` None) and for all segments together
(`app`/`model`/`prompt_version` None), per judge: the headline and the weekly series of every view."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta

import numpy as np

from monitor.feedback.agreement import AucFigure, RankFigure, auc_of, spearman_of
from monitor.store.connection import ClickHouseStore
from schemas.feedback import FEEDBACK_SAMPLE_RULE, FEEDBACK_TABLE

_TS = "DateTime64(3, 'UTC')"
# How long before the feedback window its answers may have been judged: bounds the read of the scores table (a
# month partition each); feedback on an answer older than this does not count here.
ANSWER_LOOKBACK = timedelta(days=30)
ANSWER_LEAD = timedelta(days=1)  # answers stamped after the window's end by a skewed clock still count


@dataclass(frozen=True, slots=True)
class JudgeUserAgreement:
    """One judge against users' verdicts in one segment (None fields: all segments together) and ISO week (`week`
    its Monday; None: the whole range)."""

    app: str | None
    model: str | None
    prompt_version: str | None
    judge_id: str
    week: date | None
    auc: AucFigure
    spearman: RankFigure

    @property
    def all_segments(self) -> bool:
        """Whether this is every segment's feedback together."""
        return self.app is None


@dataclass(frozen=True, slots=True)
class VerdictCount:
    """`n` feedback rows of one kind and value on answers one judge scored `score`, in one segment and week.
    `verdict`: 1 liked / 0 disliked for thumbs; the rating mapped to 0..1 for ratings."""

    app: str
    model: str
    prompt_version: str
    judge_id: str
    week: date
    rating: bool
    verdict: float
    score: float
    n: int


def feedback_table_exists(store: ClickHouseStore) -> bool:
    """Whether the store has the feedback table (a schema from before migration 046 has not)."""
    sql = "SELECT count() FROM system.tables WHERE database = {db:String} AND name = {name:String}"
    return bool(store.query(sql, {"db": store.database, "name": FEEDBACK_TABLE}).rows[0][0])


def judge_user_agreement(
    store: ClickHouseStore, start: datetime, end: datetime, level: float = 0.95
) -> list[JudgeUserAgreement]:
    """Every judge's agreement with users' feedback given in [start, end): per segment and week, per segment over
    the range, and over all segments (see the module's docstring); ordered by judge, the all-segments rows first."""
    return build_agreement(verdict_counts(store, start, end), level)


def verdict_counts(store: ClickHouseStore, start: datetime, end: datetime) -> list[VerdictCount]:
    """The judged feedback of [start, end), counted per segment, judge, week, verdict and score."""
    feedback = f"{store.database}.{FEEDBACK_TABLE}"
    window = f"feedback_time >= {{start:{_TS}}} AND feedback_time < {{end:{_TS}}}"
    live = " AND replay_run = ''" if _has_replays(store) else ""  # a table from before migration 036 has none
    sql = (
        "SELECT s.a, s.m, s.pv, s.judge_id, toMonday(f.feedback_time) AS week,\n"
        "       f.kind = 'rating' AS rating,\n"
        "       if(rating, (f.value - 1) / (f.scale - 1), if(f.negative, 0., 1.)) AS verdict, s.s, count()\n"
        f"FROM (SELECT event_id, feedback_time, kind, value, scale, negative FROM {feedback} FINAL\n"
        f"      WHERE {window} AND event_id != '' AND segment_source != 'unresolved'\n"
        "        AND (kind = 'thumbs' OR scale > 1)) AS f\n"
        "INNER JOIN (\n"
        "  SELECT event_id, judge_id, argMax(app, scored_at) AS a, argMax(model, scored_at) AS m,\n"
        "         argMax(prompt_version, scored_at) AS pv, argMax(score, scored_at) AS s\n"
        f"  FROM {store.qualified_table} FINAL\n"
        "  WHERE status = 'ok' AND isNotNull(score) AND isFinite(score)\n"
        f"    AND NOT startsWith(sample_rule, 'shadow:'){live} AND sample_rule != {{feedback_rule:String}}\n"
        f"    AND event_time >= {{answers_from:{_TS}}} AND event_time < {{answers_until:{_TS}}}\n"
        f"    AND event_id IN (SELECT event_id FROM {feedback} WHERE {window} AND event_id != '')\n"
        "  GROUP BY event_id, judge_id) AS s ON s.event_id = f.event_id\n"
        "GROUP BY s.a, s.m, s.pv, s.judge_id, week, rating, verdict, s.s\n"
        "ORDER BY s.judge_id, s.a, s.m, s.pv, week"
    )
    params = {
        "start": start,
        "end": end,
        "answers_from": start - ANSWER_LOOKBACK,
        "answers_until": end + ANSWER_LEAD,
        "feedback_rule": FEEDBACK_SAMPLE_RULE,
    }
    return [
        VerdictCount(str(a), str(m), str(pv), str(j), _day(w), bool(r), float(v), float(s), int(n))
        for a, m, pv, j, w, r, v, s, n in store.query(sql, params).rows
    ]


def _has_replays(store: ClickHouseStore) -> bool:
    sql = (
        "SELECT count() FROM system.columns WHERE database = {db:String} AND table = {t:String} AND name = 'replay_run'"
    )
    return bool(store.query(sql, {"db": store.database, "t": store.table}).rows[0][0])


def _day(value: object) -> date:
    if isinstance(value, datetime):
        return value.date()
    if isinstance(value, date):
        return value
    return date.fromisoformat(str(value))


_Key = tuple[str | None, str | None, str | None, str, date | None]


def _keys(c: VerdictCount) -> Iterable[_Key]:
    """The four views a count belongs to: its segment or all, its week or the whole range."""
    for segment in ((c.app, c.model, c.prompt_version), (None, None, None)):
        for week in (c.week, None):
            yield (*segment, c.judge_id, week)


def _order(key: _Key) -> tuple[object, ...]:
    app, model, pv, judge_id, week = key
    return (judge_id, app is not None, app or "", model or "", pv or "", week is not None, week or date.min)


def build_agreement(counts: Sequence[VerdictCount], level: float = 0.95) -> list[JudgeUserAgreement]:
    """The figures of every view of `counts` (pure): judge by judge, all segments first, the whole range first."""
    groups: dict[_Key, list[VerdictCount]] = {}
    for c in counts:
        for key in _keys(c):
            groups.setdefault(key, []).append(c)
    out = []
    for key in sorted(groups, key=_order):
        app, model, pv, judge_id, week = key
        auc, rho = figures(groups[key], level)
        out.append(JudgeUserAgreement(app, model, pv, judge_id, week, auc, rho))
    return out


def figures(counts: Sequence[VerdictCount], level: float = 0.95) -> tuple[AucFigure, RankFigure]:
    """The AUC over the thumbs of `counts` and ρ over its ratings."""

    def expand(rows: list[VerdictCount], value: str) -> np.ndarray:
        return np.repeat(np.array([getattr(c, value) for c in rows], dtype=np.float64), [c.n for c in rows])

    thumbs = [c for c in counts if not c.rating]
    ratings = [c for c in counts if c.rating]
    disliked = [c for c in thumbs if c.verdict < 0.5]
    liked = [c for c in thumbs if c.verdict >= 0.5]
    auc = auc_of(expand(disliked, "score"), expand(liked, "score"), level)
    rho = spearman_of(expand(ratings, "score"), expand(ratings, "verdict"), level)
    return auc, rho
