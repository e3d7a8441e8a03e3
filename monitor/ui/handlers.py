"""The pages' request handlers: each reads through the store thread (`monitor.ui.context.StoreThread`), turns the
rows into its page's view model (`monitor.ui.pages.*`) and renders it; the POSTs check the CSRF token and the
reviewer first."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import structlog
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import FileResponse, HTMLResponse, PlainTextResponse, RedirectResponse, Response

from monitor.alerts.state import StateStore
from monitor.feedback.agreement_queries import JudgeUserAgreement, feedback_table_exists, judge_user_agreement
from monitor.review.agreement import agreement_report
from monitor.review.label_rows import NewLabel, StoredLabel
from monitor.store.connection import ClickHouseStore
from monitor.ui import queries
from monitor.ui.context import StoreThread, UiContext
from monitor.ui.pages.agreement import DEFAULT_SPAN, build_agreement
from monitor.ui.pages.alert import load_alert
from monitor.ui.pages.answer import load_answer
from monitor.ui.pages.explore import load_explore
from monitor.ui.pages.overview import BASELINE, CURRENT, build_overview
from monitor.ui.pages.review import SCALE, load_item, revealed
from monitor.ui.security import CSRF_COOKIE, CSRF_FIELD, Reviewer, reviewer_of
from schemas.errors import UsageError

log = structlog.get_logger("monitor.ui")


def _ctx(request: Request) -> UiContext:
    ctx: UiContext = request.app.state.ui
    return ctx


def _token(request: Request) -> tuple[str, bool]:
    """The request's CSRF token (its cookie's when valid), and whether the response must set the cookie."""
    ctx = _ctx(request)
    cookie = request.cookies.get(CSRF_COOKIE)
    if ctx.signer.valid(cookie):
        assert cookie is not None
        return cookie, False
    return ctx.signer.issue(), True


def _page(request: Request, template: str, status: int = 200, **context: Any) -> HTMLResponse:
    """A rendered page with the CSRF token its forms carry (and the cookie when new)."""
    token, fresh = _token(request)
    html = _ctx(request).render(template, csrf=token, **context)
    response = HTMLResponse(html, status_code=status, headers={"Cache-Control": "no-store"})
    if fresh:
        response.set_cookie(CSRF_COOKIE, token, httponly=True, samesite="strict", path="/")
    return response


def _message(request: Request, status: int, title: str, line: str) -> HTMLResponse:
    return _page(request, "message.html.j2", status, title=title, line=line)


async def overview(request: Request) -> Response:
    """`/`: every app and its segments."""

    def read(store: ClickHouseStore) -> Any:
        latest = queries.latest_minute(store)
        if latest is None:
            return build_overview(None, [], [], {})
        as_of = latest + timedelta(minutes=1)
        current = queries.current_window(store, as_of - CURRENT, as_of)
        hours = queries.hourly(store, as_of - CURRENT - BASELINE, as_of)
        return build_overview(as_of, current, hours, StateStore(store).load())

    page = await _ctx(request).store.call(read)
    return _page(request, "overview.html.j2", page=page, nav="overview")


async def alert(request: Request) -> Response:
    """`/alert?rule=&segment=`: one episode, or 404 in one line."""
    rule, key = request.query_params.get("rule", ""), request.query_params.get("segment", "")
    page = await _ctx(request).store.call(lambda store: load_alert(store, rule, key))
    if page is None:
        return _message(request, 404, "No such alert", f"no alert state for rule {rule!r} on segment {key!r}")
    return _page(request, "alert.html.j2", page=page, nav="overview")


async def explore(request: Request) -> Response:
    """`/explore`: filtered rows, a page at a time."""
    ctx = _ctx(request)
    query = dict(request.query_params)
    try:
        page = await ctx.store.call(lambda store: load_explore(store, query, ctx.settings.page_size))
    except UsageError as e:
        return _message(request, 400, "Bad filter", str(e))
    return _page(request, "explore.html.j2", page=page, nav="explore")


async def answer(request: Request) -> Response:
    """`/answer/{event_id}`: one judged answer, or 404."""
    ctx = _ctx(request)
    event_id = request.path_params["event_id"]
    judge_id = request.query_params.get("judge_id") or None
    page = await ctx.store.call(lambda store: load_answer(store, event_id, judge_id, ctx.store_label))
    if page is None:
        return _message(request, 404, "No such answer", f"no judged row of event {event_id!r}")
    return _page(request, "answer.html.j2", page=page, nav="explore")


def _reviewer(request: Request) -> Reviewer:
    ctx = _ctx(request)
    return reviewer_of(request.headers, ctx.settings.user_header, ctx.reviewer_flag)


async def review(request: Request) -> Response:
    """`/review`: the next item for the reviewer, blind; or why labelling is refused, or that the queue is empty."""
    ctx = _ctx(request)
    who = _reviewer(request)
    if who.name is None:
        return _page(request, "review.html.j2", 403, reviewer=who, view=None, scale=SCALE, nav="review")
    name = who.name

    def next_view(thread: StoreThread) -> Any:
        item = thread.queue().next_item(name)
        return None if item is None else load_item(thread.reads, item)

    view = await ctx.store.call_self(next_view)
    if view is not None:
        ctx.served[(name, view.item.event_id)] = view.item
    return _page(request, "review.html.j2", reviewer=who, view=view, scale=SCALE, nav="review")


async def _checked_form(request: Request) -> tuple[dict[str, str], str, str] | Response:
    """The POST's form, reviewer and event id when its CSRF token is good and a reviewer is known; else the 403
    page."""
    form = await request.form()
    values = {k: v for k, v in form.items() if isinstance(v, str)}
    if not _ctx(request).signer.accepts(request.cookies.get(CSRF_COOKIE), values.get(CSRF_FIELD)):
        return _message(request, 403, "Refused", "refused: the form's CSRF token is missing or wrong; reload the page")
    who = _reviewer(request)
    if who.name is None:
        return _message(request, 403, "Refused", who.refusal)
    return values, who.name, values.get("event_id", "")


async def label(request: Request) -> Response:
    """POST `/review/label`: record the label, then reveal the judge's score."""
    ctx = _ctx(request)
    checked = await _checked_form(request)
    if isinstance(checked, Response):
        return checked
    values, name, event_id = checked
    item = ctx.served.get((name, event_id))
    if item is None:
        return _message(
            request, 409, "Not reserved", "this item is not reserved for you (any more): open /review again"
        )
    try:
        level = int(values.get("label", ""))
    except ValueError:
        return _message(request, 400, "Bad label", "label must be an integer from 0 to 4")
    new = NewLabel(event_id, name, level, values.get("comment", ""), item.route, item.inclusion_probability)
    now = ctx.now()

    def write(thread: StoreThread) -> StoredLabel:
        stored = thread.writer().record(thread.reads, new, now)
        thread.queue().release(event_id, name)
        return stored

    try:
        stored = await ctx.store.call_self(write)
    except UsageError as e:
        return _message(request, 400, "Not labelled", str(e))
    ctx.served.pop((name, event_id), None)
    log.info("labelled", event_id=event_id, route=item.route)
    return _page(request, "labelled.html.j2", done=revealed(stored), item=item, nav="review")


async def skip(request: Request) -> Response:
    """POST `/review/skip`: let the item go, then on to the next."""
    ctx = _ctx(request)
    checked = await _checked_form(request)
    if isinstance(checked, Response):
        return checked
    _, name, event_id = checked
    await ctx.store.call_self(lambda thread: thread.queue().skip(event_id, name))
    ctx.served.pop((name, event_id), None)
    return RedirectResponse("/review", status_code=303)


def _time(text: str | None, default: datetime) -> datetime:
    if not text:
        return default
    t = datetime.fromisoformat(text.strip().replace(" ", "T").removesuffix("Z"))
    return t.replace(tzinfo=UTC) if t.tzinfo is None else t.astimezone(UTC)


async def agreement(request: Request) -> Response:
    """`/agreement?since=&until=`: each judge against the reviewers, and against users' feedback."""
    ctx = _ctx(request)
    try:
        until = _time(request.query_params.get("until"), ctx.now() + timedelta(minutes=1))
        since = _time(request.query_params.get("since"), until - DEFAULT_SPAN)
    except ValueError:
        return _message(request, 400, "Bad range", "since/until: not a time (write 2026-11-02T09:00, UTC)")
    if since >= until:
        return _message(request, 400, "Bad range", "since: must be before until")

    def users(store: ClickHouseStore) -> list[JudgeUserAgreement] | None:
        return judge_user_agreement(store, since, until) if feedback_table_exists(store) else None

    report, feedback = await ctx.store.call(lambda store: (agreement_report(store, since, until), users(store)))
    return _page(request, "agreement.html.j2", page=build_agreement(report, feedback), nav="agreement")


async def healthz(request: Request) -> Response:
    """`/healthz`: the process answers (no store access)."""
    return PlainTextResponse("ok")


REPORT_CSS = Path(__file__).parents[1] / "report" / "templates" / "base.css"


async def base_css(request: Request) -> Response:
    """`/static/base.css`: the report's stylesheet, which the pages share with it (ui.css adds the UI's own)."""
    return FileResponse(REPORT_CSS, media_type="text/css")


async def store_error(request: Request, exc: Exception) -> Response:
    """A store that fails (unreachable, missing table): a 503 page of one line, logged without the request's data."""
    log.warning("store_error", path=request.url.path, error=str(exc).splitlines()[0][:300])
    return _message(request, 503, "Store unavailable", str(exc).splitlines()[0][:500])


async def http_error(request: Request, exc: Exception) -> Response:
    """Starlette's own errors (no such route, wrong method) as a page of the UI."""
    status = exc.status_code if isinstance(exc, HTTPException) else 500
    line = "no such page" if status == 404 else "method not allowed" if status == 405 else "error"
    return _message(request, status, line.capitalize(), line)
