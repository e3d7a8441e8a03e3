"""The suite's schedule under pytest-xdist: `make test` runs `--dist loadgroup`, and the tests that share a module's
store, server or browser carry one `xdist_group` so that one worker builds it once. pytest 9.2 moved a node's id where
pytest-xdist 3.8 does not look, and every group was then split across workers without a word (each worker paying for
the module's fixtures again: 50 CPU-s for the alert history alone)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

_MODULE = """
import json, os
import pytest

def _note(name):
    with open(os.environ["SCHEDULE_OUT"], "a") as out:
        out.write(json.dumps([name, os.environ.get("PYTEST_XDIST_WORKER", "")]) + "\\n")

@pytest.mark.xdist_group("shared")
@pytest.mark.parametrize("i", range(6))
def test_grouped(i):
    _note(f"grouped{i}")

@pytest.mark.parametrize("i", range(6))
def test_free(i):
    _note(f"free{i}")
"""


def test_loadgroup_keeps_each_group_on_one_worker(tmp_path: Path) -> None:
    """Under `-n 2 --dist loadgroup` (as `make test`), the six tests of one `xdist_group` all run on one worker."""
    (tmp_path / "test_grouping.py").write_text(_MODULE, encoding="utf-8")
    out = tmp_path / "ran.jsonl"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-n", "2", "--dist", "loadgroup", "-p", "no:cacheprovider", "."],
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin", "SCHEDULE_OUT": str(out)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    ran = dict(json.loads(line) for line in out.read_text(encoding="utf-8").splitlines())
    assert len(ran) == 12 and all(ran.values()), ran
    assert len({ran[f"grouped{i}"] for i in range(6)}) == 1, ran
