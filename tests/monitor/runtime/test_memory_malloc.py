"""glibc's thresholds pinned by the service (`monitor.runtime.heap_trim.pin_malloc_thresholds`): a large block freed
once no longer makes the next ones come from the heap, where they stay resident once freed. Each check runs in a
fresh interpreter: the thresholds are the process's, and glibc moves them as blocks are freed."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt and mallinfo2 are glibc's")

REPO = Path(__file__).resolve().parents[3]

# Frees one large block (as a Kafka fetch buffer is freed), then says whether the next one of the same size has a
# mapping of its own (unmapped when freed) rather than a place in the heap.
_PROBE = """
import ctypes, json, sys
from monitor.runtime.heap_trim import pin_malloc_thresholds

class Mallinfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]

libc = ctypes.CDLL(None)
libc.mallinfo2.restype = Mallinfo2
pinned = pin_malloc_thresholds() if sys.argv[1] == "pin" else False
first = bytearray(600_000)
del first
mapped_before = libc.mallinfo2().hblkhd
second = bytearray(600_000)
print(json.dumps({"pinned": pinned, "own_mapping": libc.mallinfo2().hblkhd - mapped_before >= 600_000}))
"""


def _second_block(mode: str, **env: str) -> dict[str, bool]:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    environment.update(PYTHONPATH=str(REPO), **env)
    out = subprocess.run(
        [sys.executable, "-c", _PROBE, mode], capture_output=True, text=True, env=environment, cwd=REPO, timeout=60
    )
    assert out.returncode == 0, out.stderr[-2000:]
    found: dict[str, bool] = json.loads(out.stdout.strip().splitlines()[-1])
    return found


def test_large_blocks_keep_their_own_mapping_once_the_thresholds_are_pinned() -> None:
    """By default, freeing a 600 KB block raises glibc's threshold and the next such block comes from the heap;
    with the thresholds pinned it gets a mapping of its own, returned to the system when freed."""
    assert _second_block("default") == {"pinned": False, "own_mapping": False}
    assert _second_block("pin") == {"pinned": True, "own_mapping": True}


def test_an_operators_thresholds_are_kept() -> None:
    """A threshold the operator set for glibc (MALLOC_MMAP_THRESHOLD_) is left as it is."""
    assert _second_block("pin", MALLOC_MMAP_THRESHOLD_="1048576") == {"pinned": False, "own_mapping": False}
