"""MONITOR_* and ALERTS_* settings as command-line flags of the same name (`--sample-rate` for MONITOR_SAMPLE_RATE,
`--interval` for ALERTS_INTERVAL; flags win over the environment). Each command adds the flags of the settings it
reads, each with its description and default; the settings a command reads without a flag (secrets, say) still come
from the environment."""

from __future__ import annotations

import argparse
import sys
import typing
from collections.abc import Iterable, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

from pydantic.fields import FieldInfo

from monitor.alerts.settings import ALERTS_PREFIX, AlertSettings
from monitor.config import FIELDS, Settings, load_settings
from monitor.devtools.config_reference import (
    MONITOR_SECTION,
    default_text,
    env_only,
    holds_credential,
    literal_choices,
    setting_docs,
    value_type,
)
from schemas.errors import UsageError
from schemas.settings import MONITOR_PREFIX, variables

# Where the store is and how to reach it: what every command opening the store reads (with the password, env only).
STORE_SETTINGS = (
    "clickhouse_url",
    "clickhouse_database",
    "clickhouse_table",
    "clickhouse_user",
    "clickhouse_ca_file",
    "clickhouse_verify",
)
STORE_ENV_ONLY = ("clickhouse_password",)

# The DDL and DELETEs of `migrate` and `forget` run ON CLUSTER this cluster.
CLUSTER_SETTINGS = ("clickhouse_cluster",)

RETENTION_SETTINGS = ("retention_days", "text_retention_days")

# How a Kafka client reaches the brokers (with the SASL password, env only): what `produce` reads besides its topic.
KAFKA_CONNECTION_SETTINGS = (
    "kafka_bootstrap_servers",
    "kafka_security_protocol",
    "kafka_sasl_mechanism",
    "kafka_sasl_username",
    "kafka_ssl_cafile",
    "kafka_ssl_certfile",
    "kafka_ssl_keyfile",
    "kafka_ssl_check_hostname",
    "kafka_connect_timeout_s",
)
KAFKA_ENV_ONLY = ("kafka_sasl_password",)

# What `judge` reads to build and call the judge (with the API key and the prices, env only).
JUDGE_SETTINGS = (
    "judge",
    "judge_provider",
    "judge_model",
    "judge_base_url",
    "anthropic_base_url",
    "judge_region",
    "judge_project",
    "judge_structured_output",
    "judge_score",
    "judge_server_usd_per_hour",
    "judge_server_calls_per_hour",
    "judge_concurrency",
    "judge_request_timeout_s",
    "judge_max_retries",
    "judge_max_tokens",
    "judge_max_input_chars",
    "statements_strict_threshold",
)
JUDGE_ENV_ONLY = ("judge_api_key", "anthropic_api_key", "openai_api_key", "azure_openai_api_key", "judge_prices")

_UNIT_METAVARS = {"_s": "SECONDS", "_seconds": "SECONDS", "_ms": "MS", "_days": "DAYS"}


def _metavar(name: str, annotation: Any) -> str:
    kind = value_type(annotation)
    unit = next((m for suffix, m in _UNIT_METAVARS.items() if name.endswith(suffix)), None)
    if unit and kind in (int, float):
        return unit
    if name.endswith("_port"):
        return "PORT"
    simple = {int: "N", float: "NUMBER", bool: "BOOL", Path: "FILE", timedelta: "DURATION"}
    if kind in simple:
        return simple[kind]
    if name == "kafka_bootstrap_servers":
        return "HOST:PORT[,...]"
    origin = typing.get_origin(kind)
    if origin in (list, tuple):
        return "A,B,..."
    if origin is dict:
        return "JSON"
    return name.rsplit("_", 1)[-1].upper()


def _field_help(prefix: str, name: str, field: FieldInfo) -> str:
    env = " or ".join(variables(prefix, name, field))
    # A webhook URL holds its token, and argv shows in `ps`: the flag is for trying things out.
    keep = "; keep it in the environment, flags show in ps" if holds_credential(field) else ""
    text = f"{field.description or name} [env {env}; default: {default_text(field) or 'unset'}{keep}]"
    # Markdown quotes are for docs/configuration.md; argparse formats help with %.
    return text.replace("`", "").replace("%", "%%")


def _add_field_flag(group: argparse._ActionsContainer, prefix: str, name: str, field: FieldInfo) -> None:
    flag = "--" + name.replace("_", "-")
    choices = literal_choices(field)
    text = _field_help(prefix, name, field)
    if field.annotation is bool:
        group.add_argument(flag, dest=name, action=argparse.BooleanOptionalAction, default=None, help=text)
    elif choices:
        group.add_argument(flag, dest=name, choices=choices, default=None, help=text)
    else:
        group.add_argument(flag, dest=name, default=None, metavar=_metavar(name, field.annotation), help=text)


def add_setting_flag(group: argparse._ActionsContainer, name: str) -> None:
    """Add the flag of one setting to `group`: a switch pair for a boolean, choices for a literal, else a value."""
    _add_field_flag(group, MONITOR_PREFIX, name, FIELDS[name])


def add_setting_flags(
    parser: argparse.ArgumentParser, title: str, names: Iterable[str], env_settings: Iterable[str] = ()
) -> None:
    """Add the flags of the settings `names` in one group of the help, which names the `env_settings` read too."""
    also = [" or ".join(variables(MONITOR_PREFIX, name, FIELDS[name])) for name in env_settings]
    description = f"Also read, from the environment only: {', '.join(also)}." if also else None
    group = parser.add_argument_group(f"{title} (each flag also from its MONITOR_* variable)", description)
    for name in names:
        add_setting_flag(group, name)


def add_settings_flags(parser: argparse.ArgumentParser) -> None:
    """Add a flag for every setting but the env-only ones (secrets, prices), grouped by topic: what `run` takes."""
    docs = setting_docs(MONITOR_SECTION)
    for title, _ in MONITOR_SECTION.topics:
        names = [d.name for d in docs if d.topic == title]
        flags = [n for n in names if not env_only(n, FIELDS[n])]
        add_setting_flags(parser, title, flags, [n for n in names if n not in flags])


def add_store_flags(parser: argparse.ArgumentParser, *extra: str) -> None:
    """Add the flags that say where the store is and how to reach it (`STORE_SETTINGS`), and those of the `extra`
    settings named (`RETENTION_SETTINGS` for `migrate`)."""
    add_setting_flags(parser, "store", (*STORE_SETTINGS, *extra), STORE_ENV_ONLY)


# What every `alerts` action reads; `alerts run` reads every alert setting.
ALERT_EVALUATION_SETTINGS = ("rules", "traffic_table")


def add_alert_setting_flags(parser: argparse.ArgumentParser, names: Iterable[str]) -> None:
    """Add the flags of the alert settings `names` (`monitor.alerts.settings.AlertSettings`), in one group of the
    help, made as the MONITOR_* ones are."""
    group = parser.add_argument_group(f"alerts (each flag also from its {ALERTS_PREFIX}* variable)")
    for name in names:
        _add_field_flag(group, ALERTS_PREFIX, name, AlertSettings.model_fields[name])


class _Renamed(argparse.Action):
    """A former spelling of a flag: still accepted, hidden from the help, with one line on stderr naming the new one."""

    def __init__(
        self, option_strings: Sequence[str], dest: str, new: str, nargs: int | None = None, const: Any = None, **kw: Any
    ) -> None:
        super().__init__(
            option_strings, dest, nargs=nargs, const=const, default=argparse.SUPPRESS, help=argparse.SUPPRESS, **kw
        )
        self.new = new

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        sys.stderr.write(
            f"relevancy-monitor: {option_string} is now {self.new} (the old spelling still works, for now)\n"
        )
        setattr(namespace, self.dest, self.const if self.nargs == 0 else values)


def add_renamed_flag(parser: argparse.ArgumentParser, old: str, new: str, dest: str, *, const: Any = None) -> None:
    """Accept `old` as a hidden alias of `new` (with `const`, a switch standing for `new`)."""
    if const is None:
        parser.add_argument(old, action=_Renamed, dest=dest, new=new)
    else:
        parser.add_argument(old, action=_Renamed, dest=dest, new=new, nargs=0, const=const)


def settings_from_args(ns: argparse.Namespace) -> Settings:
    """Env vars, overridden by the flags given on the command line; raises `ConfigError`."""
    given = {name: getattr(ns, name) for name in FIELDS if getattr(ns, name, None) is not None}
    return load_settings(**given)


def positive_int(text: str) -> int:
    """An argparse type: a whole number of at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def positive_float(text: str) -> float:
    """An argparse type: a number above 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value > 0:  # `not >` refuses nan too
        raise argparse.ArgumentTypeError(f"must be above 0, got {text}")
    return value


def read_file_flag(path: str) -> bytes:
    """The bytes of a `--file`; raises `UsageError` (one line) when it cannot be read."""
    try:
        return Path(path).read_bytes()
    except OSError as e:
        raise UsageError(f"cannot read --file {path}: {e.strerror or e}") from None
