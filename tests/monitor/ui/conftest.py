"""A small store for the UI's server-side tests, filled through the real writers (scored rows through
`ClickHouseStore.insert_rows`, so the rollups fill as in production; alert state through `StateStore`), and the app
over it, called through its ASGI interface (no socket).

Times are the last three hours before the current minute: the review queue takes judged rows of the last 14 days."""

from __future__ import annotations

import re
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx2
import pytest
from starlette.applications import Starlette

from monitor.alerts.evaluator import AlertState, segment_key_json
from monitor.alerts.state import StateStore
from monitor.store.connection import ClickHouseStore
from monitor.ui.app import create_app
from monitor.ui.settings import UiSettings
from schemas.scored import ScoredRow

PRIMARY = "lexical-9a8b7c6d5e4f"
SHADOW = "statements-4be1c0ffee42"
FIRING_SEGMENT = (("app", "support"), ("prompt_version", "v2"))
SCRIPT = "<script>alert(1)</script>"
HANDLER = "<img src=x onerror=alert(1)>"


def now_minute() -> datetime:
    """The current minute (UTC)."""
    return datetime.now(UTC).replace(second=0, microsecond=0)


def make_row(
    t: datetime,
    *,
    app: str = "support",
    prompt_version: str = "v1",
    judge_id: str = PRIMARY,
    score: float = 0.8,
    question: str = "When did order A17 ship?",
    response: str = "Order A17 shipped on 3 March.",
    event_id: str | None = None,
    shadow: bool = False,
) -> ScoredRow:
    """One ok scored row at `t`, with two statements and their verdicts."""
    return ScoredRow(
        event_id=event_id or uuid.uuid4().hex,
        conversation_id="c-" + uuid.uuid4().hex[:8],
        event_time=t,
        app=app,
        model="claude-haiku-4-5",
        prompt_version=prompt_version,
        judge=judge_id.split("-")[0],
        judge_model="",
        judge_id=judge_id,
        status="ok",
        error="",
        score=score,
        raw_score=score,
        reasoning=f"judged {score:.2f} because of the statements",
        statements=["Order A17 shipped on 3 March.", "We also sell gift cards."],
        verdicts=["yes", "no"],
        verdict_reasons=["", "an upsell, not about the order"],
        n_statements=2,
        question=question,
        response=response,
        sample_rate=1.0,
        sample_rule="shadow:base" if shadow else "base",
        scored_at=t + timedelta(seconds=2),
        latency_ms=900,
    )


@dataclass(frozen=True)
class Filled:
    """What the store holds that the tests look for."""

    end: datetime
    worst_event: str
    hostile_event: str
    quiet_event: str
    rule: str
    segment_key: str


def fill(store: ClickHouseStore) -> Filled:
    """Three hours of `support` (v1, then a worse v2 for the last hour, which fires `relevancy_drop`) and `search`
    (v7), a shadow judge's rows beside some, one answer holding hostile markup and one with no stored text."""
    end = now_minute()
    rows: list[ScoredRow] = []
    for i in range(180):
        t = end - timedelta(minutes=180 - i)
        late = i >= 120
        score = 0.45 + (i % 5) * 0.02 if late else 0.85 + (i % 3) * 0.03
        rows.append(make_row(t, prompt_version="v2" if late else "v1", score=round(score, 3)))
        rows.append(make_row(t, app="search", prompt_version="v7", score=0.7))
        if i % 10 == 0:
            rows.append(make_row(t, judge_id=SHADOW, score=0.6, shadow=True, event_id=rows[-2].event_id))
    worst = make_row(end - timedelta(minutes=30), prompt_version="v2", score=0.01, response="Gift cards on sale!")
    hostile = make_row(
        end - timedelta(minutes=20), app="search", prompt_version="v7", score=0.5, question=SCRIPT, response=HANDLER
    )
    quiet = make_row(
        end - timedelta(minutes=10), app="search", prompt_version="v7", score=0.6, question="", response=""
    )
    rows += [worst, hostile, quiet]
    store.insert_rows(rows, uuid.uuid4().hex)
    rule = "relevancy_drop"
    fired = end - timedelta(minutes=45)
    state = AlertState(
        rule=rule,
        segment=FIRING_SEGMENT,
        state="firing",
        since=fired - timedelta(minutes=5),
        fired_at=fired,
        last_eval_at=end,
        value=0.49,
        baseline=0.88,
        n_current=60,
        n_baseline=120,
        p_value=0.0001,
        severity="page",
        note="CUSUM 9.0 of 6.0: scores moved down",
    )
    StateStore(store, writer="test").save([state], end)
    return Filled(end, worst.event_id, hostile.event_id, quiet.event_id, rule, segment_key_json(FIRING_SEGMENT))


@pytest.fixture
def filled(store: ClickHouseStore) -> Filled:
    """The filled store's facts."""
    return fill(store)


@dataclass
class Ui:
    """The app over the test store, a client calling it, and what the store holds."""

    app: Starlette
    client: httpx2.AsyncClient
    facts: Filled

    async def csrf(self, path: str = "/review") -> str:
        """The CSRF token of a page's form (the cookie is kept by the client)."""
        page = await self.client.get(path)
        found = re.search(r'name="csrf" value="([^"]+)"', page.text)
        assert found, page.text[:2000]
        return found.group(1)


MakeUi = Callable[..., Awaitable[Ui]]


@pytest.fixture
async def make_ui(store: ClickHouseStore, filled: Filled) -> AsyncIterator[MakeUi]:
    """Builds `Ui`s over the test store (keyword arguments go to `create_app`); closes them at the end."""
    made: list[Ui] = []

    async def make(**kwargs: Any) -> Ui:
        kwargs.setdefault("settings", UiSettings())
        app = create_app(ClickHouseStore(store.url, store.database, store.table), **kwargs)
        client = httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url="http://127.0.0.1")
        ui = Ui(app, client, filled)
        made.append(ui)
        return ui

    yield make
    for ui in made:
        await ui.client.aclose()
        ui.app.state.ui.store.close()


def alert_href(facts: Filled) -> str:
    """The firing alert's page path."""
    from monitor.alerts.links import alert_path

    return alert_path(facts.rule, facts.segment_key)
