"""The embedded engine starts with the options that keep its memory small under the monitor's small inserts
(`monitor.store.embedded_engine`): outdated parts removed by its cleanup thread rather than a pool of up to 128
threads and without backing off for minutes, and freed pages returned to the system at once. Each check opens the
store in a fresh interpreter: chDB allows one engine per process, and its allocator reads its options when the
library loads."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from monitor.store.embedded_engine import ALLOCATOR_VARIABLE, CLEANUP_EVERY_S, PART_REMOVAL_THRESHOLD

pytest.importorskip("chdb")

REPO = Path(__file__).resolve().parents[3]

# Opens the store as the service does (the schema migrated), then reads back what the engine runs with.
_PROBE = """
import json, re, sys
from monitor.store.connection import ClickHouseStore
from monitor.store.migrations import Migrations

store = ClickHouseStore("chdb://" + sys.argv[1], "probe", "relevancy_scores")
store.open()
Migrations(store, auto_migrate=True).ensure()
merge_tree = dict(store.query(
    "SELECT name, value FROM system.merge_tree_settings"
    " WHERE name IN ('concurrent_part_removal_threshold', 'max_cleanup_delay_period')"
).rows)
stats = store.query("SELECT * FROM system.jemalloc_stats").rows[0][0]
decay = re.search(r"opt\\.dirty_decay_ms: (-?\\d+)", stats)
rows = store.query("SELECT count() FROM probe.relevancy_scores").rows[0][0]
store.close()
print(json.dumps({
    "threshold": int(merge_tree["concurrent_part_removal_threshold"]),
    "cleanup_every_s": int(merge_tree["max_cleanup_delay_period"]),
    "dirty_decay_ms": int(decay.group(1)) if decay else None,
    "rows": rows,
}))
"""


def _open_engine(tmp_path: Path, **env: str) -> dict[str, int | None]:
    temp = tmp_path / "tmp"
    temp.mkdir()
    environment = {k: v for k, v in os.environ.items() if k != ALLOCATOR_VARIABLE}
    environment.update(PYTHONPATH=str(REPO), TMPDIR=str(temp), **env)
    out = subprocess.run(
        [sys.executable, "-c", _PROBE, str(tmp_path / "store")],
        capture_output=True,
        text=True,
        env=environment,
        cwd=REPO,
        timeout=180,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert list(temp.iterdir()) == []  # the configuration file is gone once the engine has started
    found: dict[str, int | None] = json.loads(out.stdout.strip().splitlines()[-1])
    return found


def test_the_embedded_engine_removes_parts_on_its_cleanup_thread_and_returns_freed_pages(tmp_path: Path) -> None:
    """The store's engine runs with the part-removal threshold out of reach (no 128-thread removal pool), its cleanup
    at its shortest period (merged-away parts not held for minutes) and its allocator returning freed pages at once;
    the schema is created as before."""
    found = _open_engine(tmp_path)
    assert found == {
        "threshold": PART_REMOVAL_THRESHOLD, "cleanup_every_s": CLEANUP_EVERY_S, "dirty_decay_ms": 0, "rows": 0
    }  # fmt: skip


def test_an_operators_allocator_options_are_kept(tmp_path: Path) -> None:
    """An allocator configuration the operator set (JE_MALLOC_CONF) is the one the engine runs with."""
    found = _open_engine(tmp_path, **{ALLOCATOR_VARIABLE: "dirty_decay_ms:2500"})
    assert found["dirty_decay_ms"] == 2500 and found["threshold"] == PART_REMOVAL_THRESHOLD
