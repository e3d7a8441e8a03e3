"""Installing the console script: the wheel `pip install .` builds carries the SQL migrations and the shipped
rules, and setuptools builds it without a warning about the packages configuration."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]

# setuptools says this of every build when bytecode is off (PYTHONDONTWRITEBYTECODE): not about our configuration.
_UNRELATED = ("byte-compiling is disabled",)


def _source_copy(dest: Path) -> Path:
    """What an sdist would hold, copied away from the work tree, so the build writes no build/ or egg-info into it."""
    src = dest / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, src / name)
    for package in ("schemas", "consumers", "monitor"):
        shutil.copytree(ROOT / package, src / package, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return src


def test_the_wheel_has_the_sql_files_and_the_build_no_packaging_warning(tmp_path: Path) -> None:
    """`pip wheel --no-deps` lists schemas/sql/*.sql (and the rules, the py.typed markers) and logs no warning
    about packages (once: "Package 'schemas.sql' is absent from the `packages` configuration")."""
    src = _source_copy(tmp_path)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--verbose",
            "--wheel-dir",
            str(tmp_path / "dist"),
            str(src),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    log = done.stdout + done.stderr
    assert done.returncode == 0, log[-3000:]
    warnings = [
        line for line in log.splitlines() if "warning" in line.lower() and not any(u in line for u in _UNRELATED)
    ]
    assert warnings == [], "\n".join(warnings)
    [wheel] = (tmp_path / "dist").glob("relevancy_monitor-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    sql = {f"schemas/sql/{p.name}" for p in (ROOT / "schemas" / "sql").glob("*.sql")}
    assert sql and sql <= names, sorted(sql - names)
    assert {"monitor/alerts/default_rules.yaml", "schemas/py.typed", "consumers/py.typed", "monitor/py.typed"} <= names
    assert "schemas/sql/expected_schema.json" in names  # what `migrate` compares a store with
    assert not any(
        n.startswith("schemas/sql/") and not n.endswith((".sql", "expected_schema.json")) for n in names
    )  # data, not a package
