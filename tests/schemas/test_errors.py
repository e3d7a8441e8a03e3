"""One exception tree: every exception the project defines lives in schemas/errors.py under `MonitorError`."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import schemas.errors as errors
from schemas.errors import EXIT_USAGE, ConfigError, MonitorError, UsageError

ROOT = Path(__file__).resolve().parents[2]


def test_every_exception_class_of_the_project_is_defined_in_the_tree_module() -> None:
    """No module but schemas/errors.py defines an exception class (one tree, one place to read it)."""
    found = []
    for path in sorted(p for pkg in ("schemas", "consumers", "monitor") for p in (ROOT / pkg).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef) and any(
                isinstance(b, ast.Name)
                and (b.id.endswith(("Error", "Exception")) or b.id in ("SinkClosed", "KafkaUnavailable"))
                for b in node.bases
            ):
                found.append(f"{path.relative_to(ROOT)}:{node.name}")
    assert all(f.startswith("schemas/errors.py:") for f in found), found


def test_every_class_in_the_tree_hangs_off_the_root_and_is_drawn_in_the_docstring() -> None:
    """Each exception in schemas/errors.py derives from MonitorError and appears in the module's tree drawing."""
    classes = [c for _, c in inspect.getmembers(errors, inspect.isclass) if issubclass(c, BaseException)]
    assert classes and all(issubclass(c, MonitorError) for c in classes)
    doc = errors.__doc__ or ""
    assert all(c.__name__ in doc for c in classes), [c.__name__ for c in classes if c.__name__ not in doc]


def test_usage_and_configuration_errors_exit_2_and_the_rest_exit_1() -> None:
    """Exit codes follow the branch: operator input errors exit 2, runtime failures exit 1."""
    assert issubclass(errors.RulesError, ConfigError) and issubclass(errors.BacktestError, UsageError)
    assert {c.exit_code for c in (UsageError, ConfigError, errors.RulesError, errors.SamplingConfigError)} == {
        EXIT_USAGE
    }
    assert {
        c.exit_code for c in (errors.StoreError, errors.KafkaUnavailable, errors.JudgeError, errors.SinkClosed)
    } == {1}
