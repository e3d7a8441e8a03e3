"""The configuration reference in README.md is the one the settings models generate, and the check notices when
they drift apart: a field added or changed, or the README edited by hand."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings

from consumers.clients import KafkaSettings
from consumers.sampling import SamplingSettings
from monitor.config import SLICES
from monitor.devtools.config_reference import (
    ALERTS_SECTION,
    END_MARKER,
    MONITOR_TOPICS,
    SECTIONS,
    START_MARKER,
    Section,
    main,
    render,
    setting_docs,
    splice,
)
from monitor.process_settings import ProcessSettings
from schemas.errors import UsageError
from schemas.settings import setting_name

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
FIX = "run python -m monitor.devtools.config_reference --write README.md"


def _current(text: str, block: str) -> bool:
    return splice(text, block) == text


def test_the_readme_reference_matches_the_settings_models() -> None:
    """README.md between the markers is exactly what the models render (regenerate with --write when this fails)."""
    assert _current(README.read_text(encoding="utf-8"), render()), FIX


def test_every_variable_is_in_the_reference_with_its_type_default_and_meaning() -> None:
    """Each MONITOR_* and ALERTS_* field appears once, with a type, a default (but for secrets) and a description."""
    block = render()
    for section in SECTIONS:
        for name in section.fields:
            assert block.count(f"| `{section.prefix}{name.upper()}`") == 1, name
    for section in SECTIONS:
        for doc in setting_docs(section):
            assert doc.type and doc.meaning, doc
            assert (doc.default is None) == ("SecretStr" in str(section.fields[doc.name].annotation)), doc


def test_defaults_are_shown_as_a_user_types_them() -> None:
    """No machine-specific path: the default store is `chdb://<cwd>/...`; types read like `int ≥ 1` and `float 0..1`."""
    block = render()
    assert str(Path.cwd()) not in block and "| `chdb://<cwd>/.relevancy-monitor/chdb` |" in block
    assert "| `MONITOR_SAMPLE_RATE` | float 0..1 | `1.0` |" in block
    assert "| `MONITOR_KAFKA_MAX_POLL_RECORDS` | int ≥ 1 | `500` |" in block
    assert "| `MONITOR_REDACT_PHONE_REGIONS` | comma-separated list | `US,GB,DE,FR` |" in block
    assert "| `ALERTS_INTERVAL` | duration (`30s`, `5m`, `1h`) | `1m` |" in block


class _Added(ProcessSettings):
    """The process slice with one more field, as a developer would add it."""

    new_knob_s: float = Field(2.5, gt=0, description="a setting added without regenerating the README")


class _Changed(SamplingSettings):
    """The sampling slice with a changed default."""

    rate: float = Field(
        0.5, ge=0.0, le=1.0, validation_alias="sample_rate", description="share of conversations judged"
    )


class _Secret(KafkaSettings):
    """A secret with a default, which must still not be shown."""

    sasl_password: SecretStr | None = Field(
        SecretStr("hunter2"), validation_alias="kafka_sasl_password", description="SASL password"
    )


def _with_slice(name: str, model: type[BaseSettings]) -> Section:
    """The MONITOR_* section of the reference with the slice `name` replaced by `model`."""
    fields, slices = {}, {}
    for slice_name, original in SLICES.items():
        for attr, field in (model if slice_name == name else original).model_fields.items():
            fields[setting_name(attr, field)], slices[setting_name(attr, field)] = field, slice_name
    return Section(fields, slices, "MONITOR_", MONITOR_TOPICS)


@pytest.mark.parametrize(
    ("name", "model"), [("process", _Added), ("sampling", _Changed)], ids=["field-added", "default-changed"]
)
def test_the_check_fails_when_the_model_changes(name: str, model: type[BaseSettings]) -> None:
    """A field added or a default changed without regenerating makes the README disagree with the models."""
    sections = [_with_slice(name, model), ALERTS_SECTION]
    assert not _current(README.read_text(encoding="utf-8"), render(sections))


def test_an_added_field_lands_in_its_sections_topic() -> None:
    """A field added at the end of a slice is listed under the topic of the slice's last run, with type and default."""
    block = render([_with_slice("process", _Added)])
    assert block.index("| `MONITOR_NEW_KNOB_S` | float > 0 (seconds) | `2.5` |") > block.index("### Operations")


def test_the_unchanged_slices_render_the_readme() -> None:
    """The section rebuilt from the slices as they are renders exactly the README (the helper above is faithful)."""
    assert _current(README.read_text(encoding="utf-8"), render([_with_slice("kafka", KafkaSettings), ALERTS_SECTION]))


def test_a_secret_default_is_never_shown() -> None:
    """A secret's default stays out of the reference even when it has one."""
    assert "hunter2" not in render([_with_slice("kafka", _Secret)])


def _copy(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "README.md"
    path.write_text(text, encoding="utf-8")
    return path


def test_check_exits_1_with_one_line_on_a_hand_edited_readme_and_write_repairs_it(tmp_path: Path) -> None:
    """`--check` on a README whose reference was edited exits 1 with one line saying what to run; `--write` fixes it."""
    edited = README.read_text(encoding="utf-8").replace(
        "| `MONITOR_SAMPLE_RATE` | float 0..1 | `1.0` |", "| `MONITOR_SAMPLE_RATE` | float 0..1 | `0.5` |"
    )
    path = _copy(tmp_path, edited)
    done = subprocess.run(
        [sys.executable, "-m", "monitor.devtools.config_reference", "--check", str(path)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and "out of date" in done.stderr and f"--write {path}" in done.stderr, (
        done.stderr
    )
    assert main(["--write", str(path)]) == 0
    assert path.read_text(encoding="utf-8") == README.read_text(encoding="utf-8")
    assert main(["--check", str(path)]) == 0


def test_missing_markers_are_a_one_line_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A README without both markers, in order, is refused with one line (exit 2), and nothing is written."""
    text = f"# title\n{END_MARKER}\n{START_MARKER}\n"
    path = _copy(tmp_path, text)
    assert main(["--write", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "markers" in err
    assert path.read_text(encoding="utf-8") == text
    with pytest.raises(UsageError):
        splice("no markers here", "x")
