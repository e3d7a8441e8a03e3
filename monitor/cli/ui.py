"""`relevancy-monitor ui`: serve the web pages over the store (overview, alert, explore, answer, review, agreement).

It opens an existing store for reads (a session with `readonly = 1`); its one write is a reviewer's label, inserted
into `labels` through a second connection that writes nothing else. It binds 127.0.0.1 unless told otherwise."""

from __future__ import annotations

import argparse
import socket
from typing import Any

from monitor.cli.flags import add_store_flags, settings_from_args


def register(subparsers: Any) -> None:
    """Add the `ui` command to the CLI's subparsers."""
    p = subparsers.add_parser(
        "ui",
        help="serve the web UI: overview, alert pages, explore, answers, the review queue and judge agreement",
        description=(
            "Serve the web UI over the store (reads only, plus reviewers' labels into `labels`). Binds 127.0.0.1 by "
            "default: for a team, run it behind an authenticating proxy and set MONITOR_UI_USER_HEADER. Prints "
            "`serving http://HOST:PORT` as its first line."
        ),
    )
    p.add_argument("--host", default=None, help="address to listen on [env MONITOR_UI_HOST; default: 127.0.0.1]")
    p.add_argument(
        "--port",
        type=int,
        default=None,
        help="port, 0 for any free one [env MONITOR_UI_PORT; default: 8787]",
    )
    p.add_argument(
        "--reviewer",
        default=None,
        metavar="NAME",
        help="who labels on the review page (without MONITOR_UI_USER_HEADER, labelling needs it; ignored with it)",
    )
    add_store_flags(p, "review_routes")
    p.set_defaults(func=cmd_ui)


def cmd_ui(ns: argparse.Namespace) -> int:
    """`ui`: check the store, bind, print the URL as the first stdout line, serve until interrupted."""
    import uvicorn

    from monitor.store.connection import ClickHouseStore
    from monitor.ui.app import create_app
    from monitor.ui.settings import load_ui_settings
    from schemas.errors import UsageError

    ui = load_ui_settings(host=ns.host, port=ns.port)
    settings = settings_from_args(ns)
    app = create_app(
        ClickHouseStore.from_settings(settings.store),
        settings=ui,
        reviewer=ns.reviewer.strip() if ns.reviewer and ns.reviewer.strip() else None,
        routes=settings.review.routes,
    )
    thread = app.state.ui.store
    thread.run(lambda store: None)  # open for reads now: a missing store is one line before anything is served
    family = socket.AF_INET6 if ":" in ui.host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((ui.host, ui.port))
    except OSError as e:
        thread.close()
        raise UsageError(f"cannot listen on {ui.host}:{ui.port}: {e.strerror or e}") from None
    sock.listen(128)
    port = sock.getsockname()[1]
    host = f"[{ui.host}]" if family == socket.AF_INET6 else ui.host
    print(f"serving http://{host}:{port}", flush=True)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off"))
    try:
        server.run(sockets=[sock])
    finally:
        thread.close()
    return 0
