"""POSTing JSON to an alert receiver over httpx2, with the monitor's one retry policy.

Connection errors, 429 and 5xx are retried; any other answer but a 2xx gives up at once (the receiver rejected the
payload, and retrying will not change its mind). The waits come from a `Backoff`, at least a 429's or 503's
Retry-After up to its cap, and are awaited with `asyncio.sleep`, so a retry never holds the event loop. `transport`
is the seam for tests (`httpx2.MockTransport`); None is the network."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx2
import structlog

from monitor.backoff import Backoff, retry_after_seconds
from schemas.errors import NotifyError

log = structlog.get_logger("monitor.alerts")

USER_AGENT = "relevancy-monitor-alerts/1"
# A round waits for its deliveries, so a receiver's Retry-After is honoured only up to 15 s: beyond that the notice
# stays owed and the next round tries again.
NOTIFY_BACKOFF = Backoff(base_s=0.5, max_s=4.0, retry_after_cap_s=15.0)
RETRY_AFTER_STATUSES = frozenset({429, 503})


@dataclass(frozen=True, slots=True)
class JsonPoster:
    """POSTs JSON payloads: `timeout_s` per attempt, up to `retries` more attempts, the waits from `backoff`."""

    timeout_s: float = 5.0
    retries: int = 2
    backoff: Backoff = NOTIFY_BACKOFF
    transport: httpx2.AsyncBaseTransport | None = field(default=None, compare=False)

    async def post(self, url: str, payloads: Sequence[Any]) -> None:
        """POST each payload to `url` in order over one client; raises `NotifyError` at the first not delivered."""
        headers = {"Content-Type": "application/json", "User-Agent": USER_AGENT}
        async with httpx2.AsyncClient(transport=self.transport, timeout=self.timeout_s, headers=headers) as client:
            for payload in payloads:
                await self._post_one(client, url, json.dumps(payload, default=str).encode())

    async def _post_one(self, client: httpx2.AsyncClient, url: str, body: bytes) -> None:
        receiver, last = safe_url(url), ""
        for attempt in range(self.retries + 1):
            retry_after: float | None = None
            try:
                response = await client.post(url, content=body)
            except httpx2.RequestError as e:
                last = str(e) or type(e).__name__  # the OS's or the library's words, without the URL
            else:
                if response.is_success:
                    return
                last = f"HTTP {response.status_code}"
                if response.status_code != 429 and response.status_code < 500:
                    break  # the receiver rejected the payload; retrying will not help
                if response.status_code in RETRY_AFTER_STATUSES:
                    retry_after = retry_after_seconds(response.headers)
            if attempt < self.retries:
                delay = self.backoff.delay(attempt, retry_after)
                log.info("alert notification retry", receiver=receiver, attempt=attempt + 1, error=last, delay_s=delay)
                await asyncio.sleep(delay)
        raise NotifyError(f"POST {receiver} failed: {last}")


def safe_url(url: str) -> str:
    """`url` without its path, query or credentials: webhook URLs carry their secret there (Slack)."""
    scheme, _, rest = url.partition("://")
    host = re.split(r"[/?#]", rest, maxsplit=1)[0].rpartition("@")[2]
    return f"{scheme}://{host}/..."
