"""The review queue: which judged answer a reviewer labels next, and why.

Every served item comes from one route (`monitor.review.routing`): `control`, a uniform random draw among all judged
answers of the window; `disagree`, answers on which the primary judge and its shadow are `disagree_levels` rubric
levels apart; `borderline`, answers whose primary score is inside the band or whose confidence is low; `firing`,
answers of a segment whose alert is firing. The route is drawn against the shares (a deterministic sequence from the
queue's seed); a targeted route whose pool is empty gives its share to control.

The primary judge of an event is the judge of its rows that is not a shadow (a shadow judge's rows carry
sample_rule `shadow:<rule>`, as the report and the shadow alert rules read them): the live row before a replay's,
then the latest scoring. Within a route, items come in the order of a salted hash of their event id, so each pick is
a uniform random draw among what is left, repeatable for a seed. Each item records its inclusion probability: the
route's effective share at the draw times one over the route's pool size then (the items left for this reviewer).
The pools are read without FINAL, in one scan of the window's primary rows (control, borderline and firing) and one
join of its shadow rows (disagree); the label itself takes the item's current primary row (`label_rows`).

Left out: items anyone labelled (except that a `second_review_share` of them, picked by a salted hash of the event
id, is served once more to a different reviewer, before any new item), items reserved by another reviewer (in
memory, for `reserve_for`: one queue per UI process), and items this reviewer skipped. Decisions are the pure
functions at the top; `ReviewQueue` is the SQL shell and must be called from the one store thread."""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from monitor.review.label_rows import LABELS_TABLE, SHADOW_ROW
from monitor.review.routing import ROUTES, Route, RoutingRules
from monitor.store.connection import ClickHouseStore

SEGMENT_FIELDS = ("app", "model", "prompt_version")  # the fields of a firing segment that select its answers
FIRING_SEGMENTS = 50  # firing segments read at most (worst first is not needed: any firing one will do)
SECOND_REVIEWS = 200  # labelled items read at most when looking for one that needs a second reviewer
_MILLION = 1_000_000
_TS = "DateTime64(3, 'UTC')"


@dataclass(frozen=True, slots=True)
class QueueItem:
    """An item served to a reviewer: the answer, its primary judge, the route that picked it, its inclusion
    probability at the draw, one sentence saying why, and whether it is a second review of a labelled item."""

    event_id: str
    app: str
    judge_id: str
    route: Route
    inclusion_probability: float
    why: str
    second_review: bool


@dataclass(frozen=True, slots=True)
class Reservation:
    """An item served to `reviewer`, kept from the others until `until`."""

    reviewer: str
    until: datetime
    item: QueueItem


@dataclass(frozen=True, slots=True)
class Segment:
    """A segment whose alert `rule` is firing, as (field, value) pairs, with the start of its episode."""

    rule: str
    pairs: tuple[tuple[str, str], ...]
    since: datetime | None

    @property
    def text(self) -> str:
        """`app=shop, model=m`, for the reviewer's sentence."""
        return ", ".join(f"{f}={v}" for f, v in self.pairs) or "every answer"


# ---- pure decisions ----------------------------------------------------------------------------------------------


def unit_draw(seed: int, draw: int) -> float:
    """The `draw`-th number in [0, 1) of the sequence of `seed` (SHA-256: the same on every platform)."""
    digest = hashlib.sha256(f"{seed}:{draw}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def effective_shares(shares: Mapping[Route, float], available: Mapping[Route, bool]) -> dict[Route, float]:
    """Each route's chance at a draw: its share when its pool has items, else 0, its share going to control."""
    out: dict[Route, float] = {r: (shares.get(r, 0.0) if available.get(r, False) else 0.0) for r in ROUTES}
    out["control"] = shares.get("control", 0.0) + sum(
        shares.get(r, 0.0) for r in ROUTES if r != "control" and not available.get(r, False)
    )
    return out


def choose_route(u: float, shares: Mapping[Route, float], available: Mapping[Route, bool]) -> tuple[Route, float]:
    """The route the draw `u` in [0, 1) falls on, by cumulative effective shares in the order of `ROUTES`, and that
    route's effective share (its probability at this draw)."""
    effective = effective_shares(shares, available)
    total = sum(effective.values())
    cumulative = 0.0
    for route in ROUTES:
        cumulative += effective[route] / total
        if u < cumulative and effective[route] > 0:
            return route, effective[route] / total
    last = next(r for r in reversed(ROUTES) if effective[r] > 0)  # u at the top edge of rounding
    return last, effective[last] / total


def inclusion_probability(route_share: float, pool_size: int) -> float:
    """The chance an item had to be served at its draw: the route's effective share times 1 / the pool's size."""
    return route_share / pool_size if pool_size > 0 else 0.0


def why_sentence(route: Route, rules: RoutingRules, detail: str, *, second_review: bool = False) -> str:
    """One sentence for the reviewer on why the item was picked (never the judge's score: labelling is blind)."""
    days = rules.window.total_seconds() / 86400
    window = f"{days:g} days" if days >= 1 else f"{rules.window.total_seconds() / 3600:g} hours"
    first = {
        "control": f"Picked at random among every judged answer of the last {window} (the control slice, which "
        "measures the judge without bias).",
        "disagree": f"The primary judge and its shadow judge are {_levels(detail or str(rules.disagree_levels))} "
        "apart on this answer.",
        "borderline": "The judge's verdict on this answer is borderline or low-confidence.",
        "firing": f"From a segment whose alert is firing ({detail}).",
    }[route]
    if second_review:
        return "Another reviewer labelled this answer; a second label measures how far reviewers agree. " + first
    return first


def _levels(n: str) -> str:
    return "1 rubric level" if n == "1" else f"{n} rubric levels"


def parse_segment_key(segment_key: str) -> tuple[tuple[str, str], ...]:
    """The answer-selecting (field, value) pairs of an alert_state segment key (JSON of [[field, value], ...]);
    other fields (judge_id, a labelled set) are left out, so are malformed keys (empty)."""
    try:
        pairs = json.loads(segment_key)
    except ValueError:
        return ()
    if not isinstance(pairs, list):
        return ()
    out = []
    for pair in pairs:
        if isinstance(pair, list) and len(pair) == 2 and pair[0] in SEGMENT_FIELDS and isinstance(pair[1], str):
            out.append((str(pair[0]), pair[1]))
    return tuple(out)


# ---- the SQL shell -----------------------------------------------------------------------------------------------

_LEVEL = "least(4, greatest(0, toInt32(floor({x} * 4 + 0.5))))"  # monitor.calibration.agreement.bucket in SQL
# The order of a route's items: a salted hash of the event id (cityHash64: a third of sipHash64's cost on a scan).
_HASH = "cityHash64({salt:String}, event_id)"
# An event's primary judged rows in the window: ok, not a shadow judge's.
_PRIMARY = f"status = 'ok' AND NOT {SHADOW_ROW} AND event_time >= {{since:{_TS}}} AND event_time <= {{until:{_TS}}}"


@dataclass(frozen=True, slots=True)
class Pool:
    """A route's pool at a draw: how many items it holds, and the first in hash order (event_id, app, judge_id,
    detail), None when empty."""

    size: int
    first: tuple[str, str, str, str] | None


def _pool(size: Any, first: Any) -> Pool:
    n = int(size)
    if n == 0:
        return Pool(0, None)
    event_id, app, judge_id, detail = first
    return Pool(n, (str(event_id), str(app), str(judge_id), str(detail)))


class ReviewQueue:
    """The queue over one store (a read-only connection is enough). Sync: call it from the one store thread."""

    def __init__(
        self,
        store: ClickHouseStore,
        rules: RoutingRules,
        *,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
        seed: int = 0,
    ) -> None:
        self.store = store
        self.rules = rules
        self.seed = seed
        self._now = now
        self._draws = 0
        self._reserved: dict[str, Reservation] = {}
        self._skipped: dict[str, set[str]] = {}
        self._lock = threading.Lock()

    # -- public --

    def next_item(self, reviewer: str) -> QueueItem | None:
        """The next item for `reviewer`, reserved for them for `rules.reserve_for` (the item they hold already, if
        they have not labelled it yet); None when nothing is left to label."""
        with self._lock:
            now = self._now()
            self._expire(now)
            held = self._held_by(reviewer)
            if held is not None:
                if not self._labelled_by(held.item.event_id, reviewer):
                    self._reserved[held.item.event_id] = Reservation(reviewer, now + self.rules.reserve_for, held.item)
                    return held.item
                del self._reserved[held.item.event_id]
            excluded = sorted(
                {e for e, r in self._reserved.items() if r.reviewer != reviewer} | self._skipped.get(reviewer, set())
            )
            item = self._second_review(reviewer, excluded, now) or self._fresh(excluded, now)
            if item is not None:
                self._reserved[item.event_id] = Reservation(reviewer, now + self.rules.reserve_for, item)
            return item

    def skip(self, event_id: str, reviewer: str) -> None:
        """`reviewer` does not want to label `event_id`: never served to them again (by this queue)."""
        with self._lock:
            self._skipped.setdefault(reviewer, set()).add(event_id)
            self._release(event_id, reviewer)

    def release(self, event_id: str, reviewer: str) -> None:
        """`reviewer` labelled `event_id` (or let it go): it is no longer reserved for them."""
        with self._lock:
            self._release(event_id, reviewer)

    def reserved_for(self, event_id: str) -> str | None:
        """Who holds `event_id` now, if anyone."""
        with self._lock:
            held = self._reserved.get(event_id)
            return held.reviewer if held is not None and held.until > self._now() else None

    # -- reservations --

    def _expire(self, now: datetime) -> None:
        for event_id in [e for e, r in self._reserved.items() if r.until <= now]:
            del self._reserved[event_id]

    def _held_by(self, reviewer: str) -> Reservation | None:
        return next((r for r in self._reserved.values() if r.reviewer == reviewer), None)

    def _release(self, event_id: str, reviewer: str) -> None:
        held = self._reserved.get(event_id)
        if held is not None and held.reviewer == reviewer:
            del self._reserved[event_id]

    # -- queries --

    @property
    def _scores(self) -> str:
        return self.store.qualified_table

    @property
    def _labels(self) -> str:
        return f"{self.store.database}.{LABELS_TABLE}"

    def _labelled_by(self, event_id: str, reviewer: str) -> bool:
        sql = f"SELECT count() FROM {self._labels} WHERE event_id = {{e:String}} AND reviewer = {{r:String}}"
        return bool(self.store.query(sql, {"e": event_id, "r": reviewer}).rows[0][0])

    def _second_review(self, reviewer: str, excluded: Sequence[str], now: datetime) -> QueueItem | None:
        share = self.rules.second_review_share
        if share <= 0:
            return None
        sql = (
            "SELECT event_id, any(app), any(judge_id), any(route), any(inclusion_probability)\n"
            f"FROM {self._labels} FINAL\n"
            f"WHERE labelled_at >= {{since:{_TS}}} AND NOT has({{excluded:Array(String)}}, event_id)\n"
            "  AND sipHash64({salt:String}, event_id) % 1000000 < {share:UInt64}\n"
            "GROUP BY event_id HAVING uniqExact(reviewer) = 1 AND NOT has(groupArray(reviewer), {reviewer:String})\n"
            f"ORDER BY min(labelled_at), event_id LIMIT {SECOND_REVIEWS}"
        )
        params = {
            "since": now - self.rules.window,
            "excluded": list(excluded),
            "salt": f"second-review:{self.seed}",
            "share": round(share * _MILLION),
            "reviewer": reviewer,
        }
        rows = self.store.query(sql, params).rows
        if not rows:
            return None
        event_id, app, judge_id, route, p = rows[0]
        checked: Route = route if route in ROUTES else "control"
        return QueueItem(
            str(event_id), str(app), str(judge_id), checked, float(p),
            why_sentence(checked, self.rules, "", second_review=True), True,
        )  # fmt: skip

    def _fresh(self, excluded: Sequence[str], now: datetime) -> QueueItem | None:
        params: dict[str, Any] = {
            "since": now - self.rules.window,
            "until": now,
            "excluded": list(excluded),
            "salt": f"review:{self.seed}",
        }
        pools = self._pools(params)
        self._draws += 1
        available = {r: pools[r].size > 0 for r in ROUTES}
        route, share = choose_route(unit_draw(self.seed, self._draws), self.rules.shares, available)
        pool = pools[route]
        if pool.first is None:
            return None
        event_id, app, judge_id, detail = pool.first
        return QueueItem(
            event_id, app, judge_id, route, inclusion_probability(share, pool.size),
            why_sentence(route, self.rules, detail), False,
        )  # fmt: skip

    def _pools(self, params: dict[str, Any]) -> dict[Route, Pool]:
        """Every route's pool size and first item in hash order: one pass over the primary rows of the window for
        control, borderline and firing, one join of the shadow rows for disagree."""
        found = self._primary_pools(params)
        found["disagree"] = self._disagree_pool(params) if self.rules.shares.get("disagree", 0.0) > 0 else Pool(0, None)
        return found

    def _eligible(self) -> str:
        # Not reserved by another reviewer nor skipped by this one (`excluded`), and labelled by nobody yet.
        return (
            f"NOT has({{excluded:Array(String)}}, event_id) AND event_id NOT IN (SELECT event_id FROM {self._labels})"
        )

    def _primary_pools(self, params: dict[str, Any]) -> dict[Route, Pool]:
        low, high = self.rules.borderline
        params.update(low=low, high=high, low_confidence=self.rules.low_confidence)
        borderline = (
            "((score >= {low:Float64} AND score <= {high:Float64}) OR "
            "(score_confidence IS NOT NULL AND score_confidence < {low_confidence:Float64}))"
        )
        firing, detail = self._firing_condition(params)
        # Without FINAL: any ok row of an event means its latest row is ok (ok rows outrank error rows), and a scan
        # without it costs a third as much. Sizes count rows: an event with two primary rows (a replay under another
        # judge_id, a rescoring not merged yet) counts twice, which the inclusion probability tolerates.
        sql = (
            "SELECT count(), argMin((event_id, app, judge_id, ''), h),\n"
            f"       countIf({borderline}), argMinIf((event_id, app, judge_id, ''), h, {borderline}),\n"
            f"       countIf({firing}), argMinIf((event_id, app, judge_id, {detail}), h, {firing})\n"
            f"FROM (SELECT *, {_HASH} AS h FROM {self._scores}\n"
            f"      WHERE {_PRIMARY} AND {self._eligible()})"
        )
        n_all, first_all, n_border, first_border, n_firing, first_firing = self.store.query(sql, params).rows[0]
        return {
            "control": _pool(n_all, first_all),
            "borderline": _pool(n_border, first_border),
            "firing": _pool(n_firing, first_firing),
        }

    def _disagree_pool(self, params: dict[str, Any]) -> Pool:
        params["levels"] = self.rules.disagree_levels
        window = f"event_time >= {{since:{_TS}}} AND event_time <= {{until:{_TS}}}"
        sql = (
            "SELECT count(), argMin((event_id, app, judge_id, toString(levels)), h) FROM (\n"
            f"  SELECT p_event_id AS event_id, p_app AS app, p_judge_id AS judge_id, {_HASH} AS h,\n"
            f"    abs({_LEVEL.format(x='p_score')} - {_LEVEL.format(x='s_score')}) AS levels\n"
            f"  FROM (SELECT app AS s_app, event_id AS s_event_id, score AS s_score FROM {self._scores}\n"
            f"        WHERE status = 'ok' AND {SHADOW_ROW} AND {window}) AS s\n"
            "  INNER JOIN (SELECT app AS p_app, event_id AS p_event_id, judge_id AS p_judge_id, score AS p_score\n"
            f"        FROM {self._scores} WHERE {_PRIMARY} AND {self._eligible()}\n"
            f"          AND event_id IN (SELECT event_id FROM {self._scores} WHERE {SHADOW_ROW} AND {window})) AS p\n"
            "  ON s_app = p_app AND s_event_id = p_event_id\n"
            ") WHERE levels >= {levels:UInt8}"
        )
        n, first = self.store.query(sql, params).rows[0]
        return _pool(n, first)

    def _firing_condition(self, params: dict[str, Any]) -> tuple[str, str]:
        """The SQL condition of the answers of the firing segments (each since its episode began) and the expression
        naming the segment an answer is of; ("0", "''") when no alert fires."""
        segments = self._firing_segments()
        if not segments:
            return "0", "''"
        conds, details = [], []
        for i, seg in enumerate(segments):
            parts = [f"{field} = {{f{i}_{field}:String}}" for field, _ in seg.pairs]
            for field, value in seg.pairs:
                params[f"f{i}_{field}"] = value
            if seg.since is not None:
                parts.append(f"event_time >= {{f{i}_since:{_TS}}}")
                params[f"f{i}_since"] = seg.since
            params[f"f{i}_text"] = f"{seg.text}, rule {seg.rule}"
            conds.append("(" + " AND ".join(parts) + ")")
            details += [conds[-1], f"{{f{i}_text:String}}"]
        return "(" + " OR ".join(conds) + ")", f"multiIf({', '.join(details)}, '')"

    def _firing_segments(self) -> list[Segment]:
        sql = (
            f"SELECT rule, segment_key, since FROM {self.store.database}.alert_state FINAL WHERE state = 'firing'\n"
            f"ORDER BY rule, segment_key LIMIT {FIRING_SEGMENTS}"
        )
        out = []
        for rule, key, since in self.store.query(sql).rows:
            pairs = parse_segment_key(str(key))
            if pairs:
                out.append(Segment(str(rule), pairs, None if since is None else since.replace(tzinfo=UTC)))
        return out
