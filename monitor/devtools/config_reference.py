"""The configuration reference: every MONITOR_* and ALERTS_* variable with its type, default and meaning, rendered
from the settings slices (`monitor.config.SETTINGS`) and `monitor.alerts.settings.AlertSettings` into
docs/configuration.md between two markers, and the same words for `--help`.

    python -m monitor.devtools.config_reference --write   # regenerate the reference in docs/configuration.md
    python -m monitor.devtools.config_reference --check   # exit 1 if docs/configuration.md and the models disagree

Both take another file after the flag. `GeneratedBlock` is the marker-and-command machinery, which the metrics
reference (`monitor.devtools.metrics_reference`) shares.

A field can say how people should read it with `json_schema_extra`: `shown_type` (e.g. `host:port[,host:port…]`),
`shown_default` (markdown, for defaults that are not a value, e.g. `the system's CAs`) and `holds_credential` (true
for a value that carries a token, such as a webhook URL: its flag's help says to keep it in the environment)."""

from __future__ import annotations

import argparse
import sys
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import annotated_types
from pydantic import SecretStr
from pydantic.fields import FieldInfo

from monitor.alerts.settings import ALERTS_PREFIX, AlertSettings
from monitor.config import FIELDS, SETTINGS
from monitor.ui.settings import UI_PREFIX, UiSettings
from schemas.durations import format_duration
from schemas.errors import MonitorError, UsageError
from schemas.settings import MONITOR_PREFIX, variables

START_MARKER = "<!-- config-reference:start -->"
END_MARKER = "<!-- config-reference:end -->"
DEFAULT_FILE = Path("docs/configuration.md")  # from the repository's root, where the commands are run

# Each topic with the runs of settings it shows, in order, each run named by its first setting: a run goes on in its
# slice's field order up to the next setting that starts one (every slice's first setting does), so a setting added
# to a slice lands in the run, and the topic, of the settings around it.
MONITOR_TOPICS = (
    ("Kafka", ("kafka_bootstrap_servers",)),
    ("Dead letters and input limits", ("dlq_topic",)),
    ("OpenTelemetry in and out", ("input_format", "publish_evaluations")),
    ("ClickHouse store, text and retention", ("clickhouse_url",)),
    ("Privacy", ("redact",)),
    ("Judge", ("judge", "judge_concurrency", "judge_model", "shadow_judge_provider")),
    (
        "Sampling and cost control",
        ("sample_rate", "budget_usd_per_hour", "lag_check_s", "freshness_min_factor", "replay_confirm_usd"),
    ),
    ("Flow and delivery", ("max_in_flight",)),
    ("Operations", ("metrics_port",)),
    ("Review queue (`relevancy-monitor ui`)", ("review_routes",)),
    ("Users' feedback", ("feedback_topics",)),
)
ALERTS_TOPICS = (("Alerts (`relevancy-monitor alerts`)", ("rules",)),)

_IDENTIFIER = r"^[A-Za-z_][A-Za-z0-9_]*$"
_UNITS = {"_s": "seconds", "_seconds": "seconds", "_ms": "milliseconds", "_days": "days"}


@dataclass(frozen=True, slots=True)
class SettingDoc:
    """One setting as the reference shows it; `default` is None for a secret (never shown)."""

    name: str
    variables: tuple[str, ...]
    type: str
    default: str | None
    meaning: str
    topic: str


@dataclass(frozen=True, slots=True)
class Section:
    """Settings by name (in order) with the slice of each, the prefix of their variables and their topics."""

    fields: Mapping[str, FieldInfo]
    slices: Mapping[str, str]
    prefix: str
    topics: tuple[tuple[str, tuple[str, ...]], ...]


MONITOR_SECTION = Section(FIELDS, {name: s.slice for name, s in SETTINGS.items()}, MONITOR_PREFIX, MONITOR_TOPICS)
ALERTS_SECTION = Section(
    AlertSettings.model_fields, dict.fromkeys(AlertSettings.model_fields, "alerts"), ALERTS_PREFIX, ALERTS_TOPICS
)
UI_SECTION = Section(
    UiSettings.model_fields,
    dict.fromkeys(UiSettings.model_fields, "ui"),
    UI_PREFIX,
    (("Web UI (`relevancy-monitor ui`)", ("host",)),),
)
SECTIONS = (MONITOR_SECTION, ALERTS_SECTION, UI_SECTION)


def _extra(field: FieldInfo, key: str) -> str | None:
    extra = field.json_schema_extra
    value = extra.get(key) if isinstance(extra, dict) else None
    return value if isinstance(value, str) else None


def value_type(annotation: Any) -> Any:
    """The type of a setting's value, `X | None` read as X (that it may be unset is said by its default)."""
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    if typing.get_origin(annotation) in (typing.Union, types.UnionType) and len(args) == 1:
        return args[0]
    return annotation


def is_secret(field: FieldInfo) -> bool:
    """Whether the setting holds a secret: such a one is never a flag and its default is never shown."""
    return value_type(field.annotation) is SecretStr


# Structured values too long for a command line; like secrets (visible in `ps`), they come from the environment only.
_ENV_ONLY = frozenset({"judge_prices"})


def env_only(name: str, field: FieldInfo) -> bool:
    """Whether the setting is read from the environment only, never from a flag."""
    return is_secret(field) or name in _ENV_ONLY


def holds_credential(field: FieldInfo) -> bool:
    """Whether the setting's value carries a credential though it is not a secret (a webhook URL with its token)."""
    extra = field.json_schema_extra
    return isinstance(extra, dict) and extra.get("holds_credential") is True


def literal_choices(field: FieldInfo) -> tuple[str, ...] | None:
    """The allowed values of a `Literal` setting (optional or not), else None."""
    inner = value_type(field.annotation)
    return tuple(str(v) for v in typing.get_args(inner)) if typing.get_origin(inner) is typing.Literal else None


def _number(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def _bounds(field: FieldInfo) -> str:
    low = high = ""
    for m in field.metadata:
        if isinstance(m, annotated_types.Ge):
            low = f"≥ {_number(m.ge)}"
        elif isinstance(m, annotated_types.Gt):
            low = f"> {_number(m.gt)}"
        elif isinstance(m, annotated_types.Le):
            high = f"≤ {_number(m.le)}"
        elif isinstance(m, annotated_types.Lt):
            high = f"< {_number(m.lt)}"
    if low.startswith("≥") and high.startswith("≤"):
        return f"{low[2:]}..{high[2:]}"
    return ", ".join(b for b in (low, high) if b)


def _pattern(field: FieldInfo) -> str | None:
    return next((str(p) for m in field.metadata if (p := getattr(m, "pattern", None))), None)


def _min_length(field: FieldInfo) -> int:
    return next((int(m.min_length) for m in field.metadata if isinstance(m, annotated_types.MinLen)), 0)


def type_text(name: str, field: FieldInfo) -> str:
    """The type as people read it: `int ≥ 1`, `float 0..1`, `float > 0 (seconds)`, `` `a`, `b` or `c` ``."""
    shown = _extra(field, "shown_type")
    if shown:
        return shown
    choices = literal_choices(field)
    if choices:
        quoted = [f"`{c}`" for c in choices]
        return " or ".join([", ".join(quoted[:-1]), quoted[-1]]) if len(quoted) > 1 else quoted[0]
    inner = value_type(field.annotation)
    origin = typing.get_origin(inner)
    if inner is bool:
        return "`true` or `false`"
    if inner is SecretStr:
        return "secret string"
    if inner is Path:
        return "file path"
    if inner is timedelta:
        return "duration (`30s`, `5m`, `1h`)"
    if origin is dict:
        return "JSON object"
    if origin in (list, tuple):
        return "comma-separated list" + (", not empty" if _min_length(field) else "")
    if inner in (int, float):
        unit = next((u for suffix, u in _UNITS.items() if name.endswith(suffix)), None)
        text = " ".join(t for t in (inner.__name__, _bounds(field)) if t)
        return f"{text} ({unit})" if unit else text
    if _pattern(field) == _IDENTIFIER:
        return "name (letters, digits, `_`)"
    return "non-empty string" if _min_length(field) else "string"


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, timedelta):
        return format_duration(value)
    if isinstance(value, list | tuple):
        return ",".join(str(v) for v in value)
    return str(value)  # a float keeps its point (`1.0`): what a user types for a share or a number of seconds


def default_text(field: FieldInfo) -> str | None:
    """The default as a user would type it (markdown), `unset` or `empty`; None for a secret, whose default is never
    shown."""
    if is_secret(field):
        return None
    shown = _extra(field, "shown_default")
    if shown:
        return shown
    value = field.get_default(call_default_factory=True)
    if value is None:
        return "unset"
    if value in ("", [], (), {}):
        return "empty"
    return f"`{_value(value)}`"


def _run_of(name: str, section: Section) -> str:
    # The first setting of the run `name` is in: the last start at or before it in its slice.
    order = list(section.fields)
    starts = [
        first
        for _, firsts in section.topics
        for first in firsts
        if section.slices[first] == section.slices[name] and order.index(first) <= order.index(name)
    ]
    return max(starts, key=order.index)  # ValueError: the first setting of a slice starts no run


def topic_of(name: str, section: Section) -> str:
    """The topic a setting of `section` belongs to (see `MONITOR_TOPICS`)."""
    run = _run_of(name, section)
    return next(title for title, firsts in section.topics if run in firsts)


def setting_docs(section: Section) -> list[SettingDoc]:
    """Every setting of the section, in the order of the reference (its topics' runs)."""
    runs = [first for _, firsts in section.topics for first in firsts]
    names = sorted(section.fields, key=lambda name: runs.index(_run_of(name, section)))  # stable: field order in a run
    return [
        SettingDoc(
            name=name,
            variables=variables(section.prefix, name, field),
            type=type_text(name, field),
            default=default_text(field),
            meaning=field.description or "",
            topic=topic_of(name, section),
        )
        for name, field in ((n, section.fields[n]) for n in names)
    ]


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render(sections: Sequence[Section] = SECTIONS) -> str:
    """The markdown between the markers: one table per topic, every variable with its type, default and meaning."""
    structured = [
        f"`{v}`"
        for s in sections
        for n, field in s.fields.items()
        if n in _ENV_ONLY
        for v in variables(s.prefix, n, field)
    ]
    lines = [
        "<!-- generated from the settings slices monitor/config.py composes by "
        f"`python -m monitor.devtools.config_reference --write {DEFAULT_FILE}`: "
        "edit the descriptions there, not here -->",
        "",
        "Each `MONITOR_<NAME>` is also the flag `--<name>` of `relevancy-monitor run` (flags win), except the secrets"
        + (f" and {', '.join(structured)}" if structured else "")
        + ", which are read from the environment only. Other commands take the flags of the settings they use "
        "(`relevancy-monitor <command> --help`). Each `ALERTS_<NAME>` is also the flag `--<name>` of "
        "`relevancy-monitor alerts run`.",
    ]
    for section in sections:
        docs = setting_docs(section)
        for title, _ in section.topics:
            lines += ["", f"### {title}", "", "| variable | type | default | meaning |", "|---|---|---|---|"]
            for d in (d for d in docs if d.topic == title):
                names = " or ".join(f"`{v}`" for v in d.variables)
                lines.append(f"| {names} | {_cell(d.type)} | {_cell(d.default or '')} | {_cell(d.meaning)} |")
    return "\n".join(lines) + "\n"


@dataclass(frozen=True, slots=True)
class GeneratedBlock:
    """A block of a markdown file that code renders, between two markers, and the `--write`/`--check` command line
    of the module that renders it (`python -m <module>`)."""

    module: str
    title: str  # what the block is, for messages: "the configuration reference"
    start: str
    end: str
    default_file: Path
    render: Callable[[], str]

    def splice(self, text: str, block: str) -> str:
        """`text` with `block` between the markers; raises `UsageError` when they are missing or out of order."""
        start, end = text.find(self.start), text.find(self.end)
        if start < 0 or end < start:
            raise UsageError(f"no {self.start} ... {self.end} markers, in that order")
        return f"{text[: start + len(self.start)]}\n{block}{text[end:]}"

    def main(self, argv: Sequence[str] | None = None) -> int:
        """Write the block into a file, or check it (exit 1 with one line when it is out of date)."""
        default = self.default_file
        parser = argparse.ArgumentParser(
            prog=f"python -m {self.module}", description=f"{self.title.capitalize()} in {default}."
        )
        mode = parser.add_mutually_exclusive_group(required=True)
        mode.add_argument(
            "--write",
            metavar="FILE",
            type=Path,
            nargs="?",
            const=default,
            help=f"regenerate {self.title} between the markers of FILE (default {default})",
        )
        mode.add_argument(
            "--check",
            metavar="FILE",
            type=Path,
            nargs="?",
            const=default,
            help=f"exit 1 if {self.title} in FILE (default {default}) differs from the code",
        )
        ns = parser.parse_args(argv)
        path: Path = ns.write or ns.check
        try:
            text = _read(path)
            wanted = self.splice(text, self.render())
        except MonitorError as e:
            sys.stderr.write(f"{self.module.rpartition('.')[2]}: error: {path}: {e}\n")
            return e.exit_code
        if ns.check:
            if wanted != text:
                sys.stderr.write(f"{path}: {self.title} is out of date: run python -m {self.module} --write {path}\n")
                return 1
            return 0
        if wanted != text:
            path.write_text(wanted, encoding="utf-8")
        return 0


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except OSError as e:
        raise UsageError(f"cannot read {path}: {e.strerror or e}") from None


CONFIG_REFERENCE = GeneratedBlock(
    "monitor.devtools.config_reference", "the configuration reference", START_MARKER, END_MARKER, DEFAULT_FILE, render
)


def splice(text: str, block: str) -> str:
    """`text` with `block` between the configuration reference's markers; raises `UsageError` when they are missing
    or out of order."""
    return CONFIG_REFERENCE.splice(text, block)


def main(argv: Sequence[str] | None = None) -> int:
    """Write the configuration reference into docs/configuration.md (or FILE), or check it (exit 1 when stale)."""
    return CONFIG_REFERENCE.main(argv)


if __name__ == "__main__":
    sys.exit(main())
