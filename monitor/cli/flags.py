"""Every MONITOR_* setting as a command-line flag of the same name (flags win over the environment)."""

from __future__ import annotations

import argparse
import typing

from monitor.config import Settings, load_settings

# Secrets stay out of argv (visible in `ps`); structured values are JSON in the environment.
_ENV_ONLY = frozenset({"anthropic_api_key", "kafka_sasl_password", "judge_prices"})


def add_settings_flags(parser: argparse.ArgumentParser) -> None:
    """Add one flag per setting (`--sample-rate` for MONITOR_SAMPLE_RATE), all defaulting to the environment."""
    group = parser.add_argument_group("settings (each also from the env var MONITOR_<NAME>)")
    for name, field in Settings.model_fields.items():
        if name in _ENV_ONLY:
            continue
        flag = "--" + name.replace("_", "-")
        help_text = f"{field.description or name} [env MONITOR_{name.upper()}]"
        args = typing.get_args(field.annotation)
        if field.annotation is bool:
            group.add_argument(flag, dest=name, action=argparse.BooleanOptionalAction, default=None, help=help_text)
        elif typing.get_origin(field.annotation) is typing.Literal:
            group.add_argument(flag, dest=name, choices=list(args), default=None, help=help_text)
        else:
            group.add_argument(flag, dest=name, default=None, metavar=name.split("_")[-1].upper(), help=help_text)


STORE_SETTINGS = ("clickhouse_url", "clickhouse_database", "clickhouse_table")


RETENTION_SETTINGS = ("retention_days", "text_retention_days")


def add_store_flags(parser: argparse.ArgumentParser, *extra: str) -> None:
    """Add only the flags that say where the store is (`--clickhouse-url`, `--clickhouse-database`, `--clickhouse-table`),
    and those of the `extra` settings named (`RETENTION_SETTINGS` for `migrate`)."""
    group = parser.add_argument_group("store (each also from the env var MONITOR_<NAME>)")
    for name in (*STORE_SETTINGS, *extra):
        field = Settings.model_fields[name]
        group.add_argument("--" + name.replace("_", "-"), dest=name, default=None, help=f"{field.description or name} [env MONITOR_{name.upper()}]")


def settings_from_args(ns: argparse.Namespace) -> Settings:
    """Env vars, overridden by the flags given on the command line; raises `ConfigError`."""
    given = {name: getattr(ns, name) for name in Settings.model_fields if getattr(ns, name, None) is not None}
    return load_settings(**given)
