"""`run`'s one opening of the store, for tests: `AsyncStore.open` (migrate or check, and its log lines), then close."""

from __future__ import annotations

import asyncio

from monitor.store.async_store import AsyncStore
from monitor.store.settings import StoreSettings


def open_as_run(settings: StoreSettings) -> None:
    """Open the store of `settings` as `run` does, once, and close it; raises `StoreError`."""

    async def open_and_close() -> None:
        store = AsyncStore.from_settings(settings)
        try:
            await store.open()
        finally:
            await store.close()

    asyncio.run(open_and_close())
