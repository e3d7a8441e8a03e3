"""The explore page: its filters (a GET form, so every view is a URL), one page of the rows they select, and the
links to the previous and next pages."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from urllib.parse import urlencode

from monitor.alerts.links import answer_path
from monitor.alerts.state import StateStore
from monitor.store.connection import ClickHouseStore
from monitor.ui.queries import ListedRow, RowFilter, latest_minute, rows_page
from schemas.errors import UsageError

DEFAULT_SPAN = timedelta(days=1)
FILTERS = ("since", "until", "app", "model", "prompt_version", "judge_id", "score_min", "score_max", "rule", "segment")
_EQUAL = ("app", "model", "prompt_version", "judge_id")


@dataclass(frozen=True, slots=True)
class ExploreRow:
    """A listed row and the link to its answer."""

    row: ListedRow
    href: str


@dataclass(frozen=True, slots=True)
class ExplorePage:
    """The filters as given (to refill the form), the rows of the page, and the neighbouring pages' links."""

    values: dict[str, str]
    since: datetime
    until: datetime
    page: int
    rows: tuple[ExploreRow, ...]
    previous: str | None
    next: str | None
    rule_note: str = ""
    errors: tuple[str, ...] = field(default=())


def _time(name: str, text: str) -> datetime:
    try:
        t = datetime.fromisoformat(text.strip().replace(" ", "T").removesuffix("Z").removesuffix("UTC").strip())
    except ValueError:
        raise UsageError(f"{name}: not a time (write 2026-11-02T09:00 or 2026-11-02 09:00:00, UTC)") from None
    return t.replace(tzinfo=UTC) if t.tzinfo is None else t.astimezone(UTC)


def _score(name: str, text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise UsageError(f"{name}: not a number from 0 to 1") from None
    if not math.isfinite(v) or not 0 <= v <= 1:
        raise UsageError(f"{name}: not a number from 0 to 1")
    return v


def parse_page(text: str) -> int:
    """The page number (1 and up); UsageError otherwise."""
    try:
        n = int(text or "1")
    except ValueError:
        raise UsageError("page: not a whole number") from None
    if not 1 <= n <= 100_000:
        raise UsageError("page: must be from 1 to 100000")
    return n


def row_filter(
    values: Mapping[str, str], default_until: datetime, rule_segments: tuple[tuple[tuple[str, str], ...], ...] | None
) -> RowFilter:
    """The filter of the form's values (pure); UsageError for a value that cannot be read."""
    until = _time("until", values["until"]) if values.get("until") else default_until
    since = _time("since", values["since"]) if values.get("since") else until - DEFAULT_SPAN
    if since >= until:
        raise UsageError("since: must be before until")
    low = _score("score_min", values["score_min"]) if values.get("score_min") else None
    high = _score("score_max", values["score_max"]) if values.get("score_max") else None
    equal = tuple((k, values[k]) for k in _EQUAL if values.get(k))
    return RowFilter(since, until, equal, low, high, rule_segments)


def load_explore(store: ClickHouseStore, query: Mapping[str, str], page_size: int) -> ExplorePage:
    """One page of rows of the filters in `query`; UsageError for a value that cannot be read."""
    values = {k: query.get(k, "").strip() for k in FILTERS}
    page = parse_page(query.get("page", "1"))
    latest = latest_minute(store)
    default_until = (latest + timedelta(minutes=1)) if latest is not None else datetime.now(UTC)
    rule_segments, note = None, ""
    if values["rule"]:
        states = [s for (r, key), s in StateStore(store).load().items() if r == values["rule"]]
        if values["segment"]:
            states = [s for s in states if s.key[1] == values["segment"]]
        else:
            states = [s for s in states if s.state in ("pending", "firing")]
        rule_segments = tuple(s.segment for s in states)
        note = f"rule {values['rule']}: {len(rule_segments)} segment(s)" + (
            "" if values["segment"] else " pending or firing"
        )
    f = row_filter(values, default_until, rule_segments)
    rows = rows_page(store, f, page_size + 1, (page - 1) * page_size)
    shown = {k: v for k, v in values.items() if v}
    previous = f"/explore?{urlencode({**shown, 'page': page - 1})}" if page > 1 else None
    following = f"/explore?{urlencode({**shown, 'page': page + 1})}" if len(rows) > page_size else None
    listed = tuple(ExploreRow(r, answer_path(r.event_id, r.judge_id)) for r in rows[:page_size])
    return ExplorePage(values, f.since, f.until, page, listed, previous, following, note)
