"""The import benchmark at a tiny size, so that CI runs it. No RSS is asserted (it depends on the machine and the
installed packages); the test checks what each configuration loads, which is the benchmark's point."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import import_rss


@pytest.mark.slow
def test_the_import_benchmark_runs_and_names_what_each_configuration_loads(tmp_path: Path) -> None:
    """bench/import_rss.py builds the service in fresh interpreters, writes what it printed, and finds the lexical
    configuration without any judge SDK and the OpenAI one with the openai SDK alone."""
    path = tmp_path / "import_rss.json"
    rows = import_rss.main(path, tiny=True)
    assert json.loads(path.read_text(encoding="utf-8")) == {"configurations": rows}
    lexical, openai = rows
    assert not {"anthropic", "openai", "chdb", "sqlglot"} & set(lexical["loaded"])
    assert "openai" in openai["loaded"] and "anthropic" not in openai["loaded"]
    assert all(r["built_mb"] >= r["after_imports_mb"] > r["python_mb"] > 0 for r in rows)
