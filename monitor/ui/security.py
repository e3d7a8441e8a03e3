"""What keeps the UI safe to open in a browser (pure, and one ASGI middleware): the signed double-submit CSRF token,
the headers every response carries (a strict Content-Security-Policy among them) and who the reviewer is.

The CSRF token is `nonce.signature`, the signature an HMAC-SHA256 of the nonce under the process's key (or
MONITOR_UI_SECRET). It is set in a `SameSite=Strict; HttpOnly` cookie and repeated in each form; a POST is accepted
only when both are present, equal and signed by this key: a page on another site can neither read the cookie nor
forge a signed value."""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Mapping
from dataclasses import dataclass

from starlette.types import ASGIApp, Message, Receive, Scope, Send

CSRF_COOKIE = "csrf"
CSRF_FIELD = "csrf"
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; form-action 'self'; "
    "frame-ancestors 'none'; base-uri 'none'"
)
SECURITY_HEADERS: tuple[tuple[bytes, bytes], ...] = (
    (b"content-security-policy", CONTENT_SECURITY_POLICY.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"same-origin"),
    (b"x-frame-options", b"DENY"),
)
MAX_REVIEWER_CHARS = 200


class CsrfSigner:
    """Issues and checks the signed double-submit tokens under one key."""

    def __init__(self, key: bytes | None = None) -> None:
        self._key = key if key else secrets.token_bytes(32)

    def _sign(self, nonce: str) -> str:
        return hmac.new(self._key, nonce.encode(), hashlib.sha256).hexdigest()

    def issue(self) -> str:
        """A fresh token: a random nonce and its signature."""
        nonce = secrets.token_urlsafe(18)
        return f"{nonce}.{self._sign(nonce)}"

    def valid(self, token: str | None) -> bool:
        """Whether `token` is one this key signed."""
        if not token or token.count(".") != 1:
            return False
        nonce, signature = token.split(".")
        return bool(nonce) and hmac.compare_digest(signature, self._sign(nonce))

    def accepts(self, cookie: str | None, field: str | None) -> bool:
        """A POST's check: the cookie and the form's token are present, equal and signed by this key."""
        return cookie is not None and field is not None and hmac.compare_digest(cookie, field) and self.valid(cookie)


@dataclass(frozen=True, slots=True)
class Reviewer:
    """Who labels, or why nobody may: `name` is None with the one-line `refusal`."""

    name: str | None
    refusal: str = ""


def reviewer_of(headers: Mapping[str, str], user_header: str | None, flag: str | None) -> Reviewer:
    """The reviewer of a request: the trusted proxy's header when MONITOR_UI_USER_HEADER names one (and only then),
    else `ui --reviewer NAME`; else nobody, saying how to become one."""
    if user_header:
        value = headers.get(user_header.lower(), "").strip()
        if not value:
            return Reviewer(None, f"labelling needs the {user_header} header, set by the authenticating proxy")
        if len(value) > MAX_REVIEWER_CHARS or not value.isprintable():
            return Reviewer(None, f"the {user_header} header is not a reviewer's name")
        return Reviewer(value)
    if flag:
        return Reviewer(flag)
    return Reviewer(
        None,
        "labelling needs a reviewer: start `relevancy-monitor ui --reviewer NAME`, or set MONITOR_UI_USER_HEADER "
        "behind an authenticating proxy",
    )


class SecurityHeaders:
    """ASGI middleware: every HTTP response gets `SECURITY_HEADERS` (errors and static files too)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Pass the request on, adding the headers to the response's start."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                names = {name.lower() for name, _ in message.get("headers", [])}
                extra = [(n, v) for n, v in SECURITY_HEADERS if n not in names]
                message["headers"] = [*message.get("headers", []), *extra]
            await send(message)

        await self.app(scope, receive, with_headers)
