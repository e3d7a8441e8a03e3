"""The periodic heap trim of the service (`monitor.runtime.heap_trim`); what it returns to the system is measured by
bench/memory_backlog.py, not here."""

from __future__ import annotations

import asyncio
import platform

import pytest

from monitor.runtime.heap_trim import glibc_malloc_trim, trim_heap_every


async def test_the_heap_is_trimmed_every_interval_until_cancelled() -> None:
    """`trim_heap_every` calls the trim once per interval, and no more once its task is cancelled."""
    calls = 0
    three = asyncio.Event()

    def trim() -> None:
        nonlocal calls
        calls += 1
        if calls == 3:
            three.set()

    task = asyncio.create_task(trim_heap_every(0.01, trim))
    await asyncio.wait_for(three.wait(), timeout=10)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    stopped_at = calls
    await asyncio.sleep(0.05)
    assert calls == stopped_at


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="malloc_trim is glibc's")
def test_glibc_malloc_trim_is_found_and_callable() -> None:
    """On glibc the trim is the C library's `malloc_trim(0)`, which answers 0 or 1 (whether it released memory)."""
    trim = glibc_malloc_trim()
    assert trim is not None
    assert trim() in (0, 1)
