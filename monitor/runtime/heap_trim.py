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
import os
from collections.abc import Callable

import structlog

log = structlog.get_logger("monitor.runtime.heap_trim")

TRIM_EVERY_S = 30.0

# glibc serves a block of at least its mmap threshold (128 KiB at first) with a mapping of its own, unmapped when
# freed; but the first time such a block is freed it raises that threshold to the block's size (up to 32 MiB) and the
# heap's trim threshold to twice that, so from then on the Kafka client's fetch buffers (~1 MiB) and the store's insert
# blocks come from the heap and stay there, free but resident (10-17 MB at the peak of bench/memory_backlog.py). Set
# explicitly, the thresholds stay where they are.
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # mallopt's parameters (malloc.h)
MMAP_THRESHOLD_BYTES = 256 * 1024
TRIM_THRESHOLD_BYTES = 1024 * 1024
_OPERATOR_VARIABLES = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_")  # glibc's own; read at start


def pin_malloc_thresholds() -> bool:
    """Fix glibc's mmap and trim thresholds (`MMAP_THRESHOLD_BYTES`, `TRIM_THRESHOLD_BYTES`) so that large blocks are
    handed back when freed; False, changing nothing, where there is no glibc or the operator set either threshold."""
    if any(name in os.environ for name in _OPERATOR_VARIABLES):
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    mmap_set = mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)
    trim_set = mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES)
    return bool(mmap_set and trim_set)


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
