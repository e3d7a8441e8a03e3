"""The README is a short guide whose links lead to pages that exist; the configuration reference in
docs/configuration.md is the one the settings models generate, and the check notices when they drift apart: a field
added or changed, or the page edited by hand."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings

from consumers.settings import KafkaSettings, SamplingSettings
from monitor.config import SLICES
from monitor.devtools.config_reference import (
    ALERTS_SECTION,
    CONFIG_REFERENCE,
    MONITOR_TOPICS,
    SECTIONS,
    UI_SECTION,
    GeneratedBlock,
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
CONFIGURATION = ROOT / "docs" / "configuration.md"
FIX = "run python -m monitor.devtools.config_reference --write docs/configuration.md"


def _current(text: str, block: str) -> bool:
    return splice(text, block) == text


def test_the_configuration_reference_matches_the_settings_models() -> None:
    """docs/configuration.md between the markers is exactly what the models render (regenerate with --write)."""
    assert _current(CONFIGURATION.read_text(encoding="utf-8"), render()), FIX


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

    new_knob_s: float = Field(2.5, gt=0, description="a setting added without regenerating the reference")


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
    """A field added or a default changed without regenerating makes docs/configuration.md disagree with the models."""
    sections = [_with_slice(name, model), ALERTS_SECTION, UI_SECTION]
    assert not _current(CONFIGURATION.read_text(encoding="utf-8"), render(sections))


def test_an_added_field_lands_in_its_sections_topic() -> None:
    """A field added at the end of a slice is listed under the topic of the slice's last run, with type and default."""
    block = render([_with_slice("process", _Added)])
    assert block.index("| `MONITOR_NEW_KNOB_S` | float > 0 (seconds) | `2.5` |") > block.index("### Operations")


def test_the_unchanged_slices_render_the_configuration_page() -> None:
    """The section rebuilt from the slices as they are renders exactly the page (the helper above is faithful)."""
    text = CONFIGURATION.read_text(encoding="utf-8")
    assert _current(text, render([_with_slice("kafka", KafkaSettings), ALERTS_SECTION, UI_SECTION]))


def test_a_secret_default_is_never_shown() -> None:
    """A secret's default stays out of the reference even when it has one."""
    assert "hunter2" not in render([_with_slice("kafka", _Secret)])


def _copy(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "configuration.md"
    path.write_text(text, encoding="utf-8")
    return path


def test_check_exits_1_with_one_line_on_a_hand_edited_page_and_write_repairs_it(tmp_path: Path) -> None:
    """`--check` on a page whose reference was edited exits 1 with one line saying what to run; `--write` fixes it."""
    edited = CONFIGURATION.read_text(encoding="utf-8").replace(
        "| `MONITOR_SAMPLE_RATE` | float 0..1 | `1.0` |", "| `MONITOR_SAMPLE_RATE` | float 0..1 | `0.5` |"
    )
    path = _copy(tmp_path, edited)
    assert_stale_check_says_what_to_run("monitor.devtools.config_reference", path)
    assert main(["--write", str(path)]) == 0
    assert path.read_text(encoding="utf-8") == CONFIGURATION.read_text(encoding="utf-8")
    assert main(["--check", str(path)]) == 0


def assert_stale_check_says_what_to_run(module: str, path: Path) -> None:
    """`python -m <module> --check <path>` exits 1 and prints one line, on stderr, naming the `--write` to run."""
    done = subprocess.run(
        [sys.executable, "-m", module, "--check", str(path)], capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and "out of date" in done.stderr and f"--write {path}" in done.stderr, (
        done.stderr
    )


def assert_markers_out_of_order_are_refused(
    write: Callable[[list[str]], int], block: GeneratedBlock, path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--write` into a file whose end marker comes first exits 2 with one line and leaves the file as it was."""
    text = f"# title\n{block.end}\n{block.start}\n"
    path.write_text(text, encoding="utf-8")
    assert write(["--write", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "markers" in err
    assert path.read_text(encoding="utf-8") == text


def test_missing_markers_are_a_one_line_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A file without both markers, in order, is refused with one line (exit 2), and nothing is written."""
    assert_markers_out_of_order_are_refused(main, CONFIG_REFERENCE, tmp_path / "configuration.md", capsys)
    with pytest.raises(UsageError):
        splice("no markers here", "x")


def test_check_and_write_default_to_docs_configuration_md(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without a file, `--check` reads docs/configuration.md (from the repository's root) and finds it current."""
    monkeypatch.chdir(ROOT)
    assert main(["--check"]) == 0


def test_the_readme_is_a_short_guide_with_the_first_steps_on_its_first_screen() -> None:
    """README.md stays a guide of at most 300 lines, with `make demo` and `make test` in its first 25 lines."""
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 300, len(lines)
    first_screen = "\n".join(lines[:25])
    assert "make demo" in first_screen and "make test" in first_screen


# [text](target) outside code; the text may hold `code` and line breaks, the target has no spaces.
_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def _prose(text: str) -> str:
    """`text` without its fenced code blocks (a `# comment` there is no heading, a `[x](y)` no link)."""
    kept, fence = [], False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fence = not fence
        elif not fence:
            kept.append(line)
    return "\n".join(kept)


def _anchors(path: Path) -> set[str]:
    """The anchors GitHub gives the headings of a markdown file (lower case, punctuation dropped, spaces as -)."""
    seen: dict[str, int] = {}
    for line in _prose(path.read_text(encoding="utf-8")).splitlines():
        if match := re.match(r"#{1,6} (.+)", line):
            slug = re.sub(r"[^\w\- ]", "", match.group(1).strip().lower()).replace(" ", "-")
            seen[slug] = seen.get(slug, -1) + 1
            if seen[slug]:
                seen[f"{slug}-{seen[slug]}"] = 0
    return set(seen)


def broken_links(page: Path) -> list[str]:
    """The relative links of `page` whose file does not exist, or whose anchor names no heading of a markdown file."""
    broken = []
    for target in _LINK.findall(_prose(page.read_text(encoding="utf-8"))):
        if re.match(r"[a-z]+:", target):  # https:, mailto:: not ours to check
            continue
        file, _, anchor = target.partition("#")
        path = (page.parent / file).resolve() if file else page
        if not path.exists():
            broken.append(f"{target}: no such file")
        elif anchor and path.suffix == ".md" and anchor not in _anchors(path):
            broken.append(f"{target}: no such heading")
    return broken


PAGES = [README, *sorted((ROOT / "docs").glob("*.md"))]


@pytest.mark.parametrize("page", PAGES, ids=[p.relative_to(ROOT).as_posix() for p in PAGES])
def test_every_relative_link_leads_to_a_file_that_exists(page: Path) -> None:
    """Each relative link of README.md and docs/*.md names an existing file or folder (and, with an anchor into a
    markdown file, one of its headings)."""
    assert broken_links(page) == []


def test_a_broken_link_or_anchor_is_found(tmp_path: Path) -> None:
    """The link check reports a missing file and a missing heading, and passes a good link, an anchor and a URL."""
    (tmp_path / "other.md").write_text("# Other page\n\n## A section: with punctuation\n", encoding="utf-8")
    page = tmp_path / "page.md"
    page.write_text(
        "# Page\n\n[ok](other.md) [ok](other.md#a-section-with-punctuation) [ok](#page) [web](https://example.com/x)\n"
        "[gone](missing.md) [bad anchor](other.md#nowhere)\n\n```\n[in code](ignored.md)\n```\n",
        encoding="utf-8",
    )
    assert broken_links(page) == ["missing.md: no such file", "other.md#nowhere: no such heading"]


def test_the_readme_links_every_docs_page() -> None:
    """The README's "Read more" reaches every page of docs/, so none is left for a newcomer to stumble on."""
    files = {target.partition("#")[0] for target in _LINK.findall(_prose(README.read_text(encoding="utf-8")))}
    missing = [p.name for p in sorted((ROOT / "docs").glob("*.md")) if f"docs/{p.name}" not in files]
    assert missing == []
