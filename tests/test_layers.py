"""The import layers hold, and the check that enforces them (import-linter, contracts in pyproject.toml) fails
when a forbidden import is added."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("schemas", "consumers", "monitor")


def lint_imports(tree: Path) -> subprocess.CompletedProcess[str]:
    """Run import-linter over the packages in `tree` with the project's contracts."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    # The packages in `tree` shadow the installed ones: PYTHONPATH comes before site-packages.
    script = Path(sys.executable).parent / "lint-imports"  # installed beside the interpreter by the dev extra
    return subprocess.run(
        [str(script), "--config", str(tree / "pyproject.toml"), "--no-cache"],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def copy_tree(dest: Path) -> Path:
    """A copy of the three packages and pyproject.toml, without caches."""
    for name in PACKAGES:
        shutil.copytree(ROOT / name, dest / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", dest / "pyproject.toml")
    return dest


def test_the_tree_keeps_every_import_contract() -> None:
    """schemas → consumers → monitor, and the runtime, judges, alerts and dev tools keep out of what they must not
    import."""
    done = lint_imports(ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 broken" in done.stdout


@pytest.mark.parametrize(
    ("module", "line", "contract"),
    [
        ("monitor/runtime/sink.py", "import monitor.cli.main", "the service runtime never imports the command line"),
        (
            "monitor/runtime/pipeline.py",
            "from monitor.devtools import traffic",
            "the service runtime never imports the command line",
        ),
        ("consumers/offsets.py", "import monitor.config", "schemas, then consumers, then monitor"),
        ("schemas/events.py", "import consumers.decode", "schemas, then consumers, then monitor"),
        ("monitor/judges/llm.py", "import monitor.config", "judges know nothing of the configuration"),
        ("monitor/devtools/traffic.py", "from monitor.cli import table", "the dev tools never import the command line"),
        ("monitor/store/retention.py", "from monitor.canary import table", "the store imports only schemas"),
        (
            "monitor/judging/guarded_judge.py",
            "import monitor.runtime.pipeline",
            "judging (the guards that live, replay",
        ),
        ("monitor/judging/budget.py", "from monitor.replay import run", "judging (the guards that live, replay"),
        ("monitor/store/connection.py", "import monitor.runtime.metrics", "the store imports only schemas"),
        (
            "monitor/config.py",
            "from monitor.alerts.rules import parse_rules",
            "the configuration composes the slices of the components",
        ),
        ("monitor/alerts/metric_specs.py", "from monitor.alerts import observations", "no circles of imports"),
        ("monitor/judging/budget.py", "import monitor.config", "no circles of imports"),
        ("consumers/otlp/records.py", "from consumers import deadletter", "the OpenTelemetry reader is pure decoding"),
        ("monitor/publish/publisher.py", "import monitor.runtime.metrics", "publishing evaluations knows nothing"),
    ],
)
def test_a_forbidden_import_breaks_its_contract(tmp_path: Path, module: str, line: str, contract: str) -> None:
    """Adding a forbidden import (even one hidden inside a function) makes the layer check fail, naming the contract."""
    tree = copy_tree(tmp_path)
    target = tree / module
    target.write_text(
        target.read_text(encoding="utf-8") + f"\n\ndef _sneaky() -> None:\n    {line}  # noqa\n", encoding="utf-8"
    )
    done = lint_imports(tree)
    assert done.returncode != 0
    flat = " ".join(done.stdout.split())  # long contract names wrap over lines
    verdict = re.search(re.escape(contract) + r".*? (KEPT|BROKEN)", flat)
    assert verdict is not None and verdict.group(1) == "BROKEN", done.stdout
