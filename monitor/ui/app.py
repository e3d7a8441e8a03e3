"""The web app of `relevancy-monitor ui`: its routes, middleware and error pages, wired to the handlers
(`monitor.ui.handlers`) over one store thread (`monitor.ui.context`)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from monitor.review.routing import load_routing
from monitor.store.connection import ClickHouseStore
from monitor.ui import handlers as h
from monitor.ui.context import StoreThread, UiContext
from monitor.ui.security import CsrfSigner, SecurityHeaders
from monitor.ui.settings import UiSettings
from schemas.errors import StoreError

STATIC = Path(__file__).parent / "static"
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1", "[::1]")


def create_app(
    store: ClickHouseStore | None = None,
    *,
    url: str | None = None,
    database: str = "relevancy",
    table: str = "relevancy_scores",
    settings: UiSettings | None = None,
    reviewer: str | None = None,
    routes: Path | None = None,
    store_label: str | None = None,
    now: Callable[[], datetime] | None = None,
) -> Starlette:
    """The app over `store` (a connection not opened yet), or over the store at `url`/`database`/`table`. Labels as
    `reviewer` unless `settings.user_header` names the trusted proxy's header."""
    if store is None:
        if url is None:
            raise ValueError("create_app needs a store or a url")
        store = ClickHouseStore(url, database, table)
    ui = settings if settings is not None else UiSettings()
    writes = store.sibling()
    clock = now or (lambda: datetime.now(UTC))
    thread = StoreThread(store, writes, load_routing(routes), clock)
    key = ui.secret.get_secret_value().encode() if ui.secret is not None else None
    ctx = UiContext(ui, reviewer, CsrfSigner(key), thread, store_label or _label(store))
    app = Starlette(
        routes=[
            Route("/", h.overview),
            Route("/healthz", h.healthz),
            Route("/alert", h.alert),
            Route("/explore", h.explore),
            Route("/answer/{event_id:path}", h.answer),
            Route("/review", h.review),
            Route("/review/label", h.label, methods=["POST"]),
            Route("/review/skip", h.skip, methods=["POST"]),
            Route("/agreement", h.agreement),
            Route("/static/base.css", h.base_css),
            Mount("/static", app=StaticFiles(directory=STATIC), name="static"),
        ],
        middleware=_middleware(ui),
        exception_handlers={StoreError: h.store_error, HTTPException: h.http_error},
    )
    app.state.ui = ctx
    return app


def _middleware(ui: UiSettings) -> list[Middleware]:
    """The security headers on every response; on a loopback address, only requests naming it as their Host (a web
    page that rebinds its own name to 127.0.0.1 would otherwise read the pages and their CSRF tokens)."""
    out = [Middleware(SecurityHeaders)]
    if ui.host in LOOPBACK_HOSTS:
        out.append(Middleware(TrustedHostMiddleware, allowed_hosts=list(LOOPBACK_HOSTS)))
    return out


def _label(store: ClickHouseStore) -> str:
    from monitor.report.write import store_label

    return store_label(store.url)
