"""How the embedded engine (chDB) starts: the configuration and allocator options it gets, for the memory of a
process that inserts a few rows a second.

Three of the engine's defaults are sized for a server with many cores and spare memory, and under the monitor's small,
frequent inserts they cost resident memory for nothing (bench/memory_backlog.py, BENCHMARKS.md):

- **Part removal.** chDB deletes merged-away parts at its periodic cleanup; when more than
  `concurrent_part_removal_threshold` (100) wait, it removes them on a pool that starts up to 128 threads, which
  then stay idle in the engine's global pool for the life of the process (~126 threads, ~15 MB of stacks and thread
  caches). Removing a few hundred small local parts one after another takes milliseconds, so the threshold is raised
  out of reach: the cleanup thread removes them itself. What is stored and read is unchanged.
- **Merged-away parts.** chDB forgets a part's in-memory description only when its cleanup removes the part, and
  the cleanup of a table that is busy with small inserts backs off to every 300 s (`max_cleanup_delay_period`): five
  minutes of merged-away parts (~1,500 under the monitor's one insert a second into the scores table and its rollups)
  were held, ~15-20 MB, then dropped at once. The cleanup runs every 30-40 s instead, its shortest period.
- **Dirty pages.** The engine's allocator (its own jemalloc) keeps freed pages for 5 s before returning them
  (`dirty_decay_ms`); the merges behind small inserts free blocks continuously, so 20-30 MB of freed pages stay
  resident. They are returned at once (`dirty_decay_ms:0`). jemalloc reads this from `JE_MALLOC_CONF` when the engine
  loads; an operator's own `JE_MALLOC_CONF` is kept as it is.

The configuration is a file (chDB reads ClickHouse's server and MergeTree settings only from one), written to a
private temporary directory and removed once the engine has started: it reads its configuration once, at start."""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

# Above any number of parts the cleanup finds at once here, so it never hands them to the 128-thread pool.
PART_REMOVAL_THRESHOLD = 1_000_000_000
CLEANUP_EVERY_S = 30  # the engine's `cleanup_delay_period`: its cleanup no longer backs off beyond it
ENGINE_CONFIG = f"""<clickhouse>
    <merge_tree>
        <concurrent_part_removal_threshold>{PART_REMOVAL_THRESHOLD}</concurrent_part_removal_threshold>
        <max_cleanup_delay_period>{CLEANUP_EVERY_S}</max_cleanup_delay_period>
    </merge_tree>
</clickhouse>
"""
ALLOCATOR_VARIABLE = "JE_MALLOC_CONF"  # chDB's jemalloc is built with the `je_` prefix
ALLOCATOR_OPTIONS = "dirty_decay_ms:0"


def set_allocator_options() -> None:
    """Have the engine's allocator return freed pages at once, unless the operator configured it: effective only
    before chDB is first imported (jemalloc reads its options when the library loads)."""
    if "chdb" not in sys.modules:
        os.environ.setdefault(ALLOCATOR_VARIABLE, ALLOCATOR_OPTIONS)


@contextmanager
def engine_options() -> Iterator[dict[str, str]]:
    """The options of the engine's connection string (`chdb_options` of clickhouse-connect's client) while the
    engine starts: its configuration file, removed on exit. A running engine ignores them (one per process)."""
    set_allocator_options()
    with tempfile.TemporaryDirectory(prefix="relevancy-monitor-engine-") as directory:
        config = Path(directory, "config.xml")
        config.write_text(ENGINE_CONFIG, encoding="utf-8")
        yield {"config-file": str(config)}
