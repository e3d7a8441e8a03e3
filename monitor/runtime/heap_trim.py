"""Handing the allocator's free memory back to the system while the service runs.

glibc's malloc keeps what the process frees for reuse, in one heap per thread that allocated: the store's thread
(each insert's buffers), the Kafka client's and the event loop's. After a burst (a resume racing through a backlog,
a large insert) that memory stays resident although nothing uses it: under the 1M-event backlog of
bench/memory_backlog.py, 15-26 MB at the end of a run, all of which `malloc_trim(0)` returned. Trimming every
`TRIM_EVERY_S` returns it as it appears; one call takes a few milliseconds on the event loop (the benchmark reports
them). Elsewhere than glibc (musl, macOS) there is no `malloc_trim` and nothing is done."""

from __future__ import annotations

import asyncio
import ctypes
from collections.abc import Callable

import structlog

log = structlog.get_logger("monitor.runtime.heap_trim")

TRIM_EVERY_S = 30.0


def glibc_malloc_trim() -> Callable[[], object] | None:
    """`malloc_trim(0)` of this process's C library, or None where it has none (not glibc)."""
    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return lambda: trim(0)


async def trim_heap_every(seconds: float = TRIM_EVERY_S, trim: Callable[[], object] | None = None) -> None:
    """Call `trim` (glibc's `malloc_trim(0)` by default) every `seconds` until cancelled; returns at once where there
    is nothing to call."""
    trim = trim or glibc_malloc_trim()
    if trim is None:
        log.info("heap_trim_unavailable", note="not glibc: freed memory is returned as the C library decides")
        return
    while True:
        await asyncio.sleep(seconds)
        trim()
