"""What every settings model shares: how a slice reads its MONITOR_* variables (`MONITOR_SLICE`), the kinds of
values read from the environment (comma-separated lists, JSON, http(s) URLs, readable files, host:port lists), and
loading with one-line errors naming the variable (`load_model`, `describe_error`, `check_unknown_env`).

A slice field's setting name is its `validation_alias` when it has one (`kafka_bootstrap_servers` for
`KafkaSettings.bootstrap_servers`), else its own name: the variable is MONITOR_<NAME> and the flag --<name>. The
prefix applies to aliases too (`env_prefix_target="all"`), so no slice reads an unprefixed variable by accident."""

from __future__ import annotations

import difflib
import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Annotated, Any, TypeVar

from pydantic import AfterValidator, BeforeValidator, SecretStr, ValidationError
from pydantic.fields import FieldInfo
from pydantic_core import PydanticCustomError
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict, SettingsError

from schemas.errors import ConfigError

S = TypeVar("S", bound=BaseSettings)

MONITOR_PREFIX = "MONITOR_"

# Not populate_by_name: it would also read MONITOR_<attribute> (MONITOR_SAMPLE_RATE for the shadow's sample_rate).
MONITOR_SLICE = SettingsConfigDict(
    env_prefix=MONITOR_PREFIX, env_prefix_target="all", extra="forbid", validate_default=True, frozen=True
)


def setting_name(attr: str, field: FieldInfo) -> str:
    """The setting a slice field carries: its alias, else its own name."""
    return field.validation_alias if isinstance(field.validation_alias, str) else attr


def split_csv(value: Any) -> Any:
    """`a, b,,c` as ["a", "b", "c"]; anything but a string unchanged."""
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    return value


def parse_json(value: Any) -> Any:
    """A JSON string parsed (a ValueError naming no traceback when it is not JSON); anything else unchanged."""
    # Parsed here rather than by pydantic-settings, whose parse error is a traceback that names no variable.
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError as e:
            raise ValueError(f"not valid JSON ({e})") from None
    return value


def http_url(value: str | None) -> str | None:
    """Refuse a URL that is neither http:// nor https://."""
    if value and not value.startswith(("http://", "https://")):
        raise ValueError("must be an http:// or https:// URL")
    return value


def readable_file(value: Path | None) -> Path | None:
    """Refuse a path that is not a readable file (checked here so the error names its variable)."""
    if value is not None:
        if not value.is_file():
            raise ValueError(f"no such file {value.absolute()}")
        if not os.access(value, os.R_OK):
            raise ValueError(f"cannot read {value.absolute()} (permissions)")
    return value


def host_ports(value: str) -> str:
    """Refuse anything but host:port[,host:port…]: a host without its port is refused too (a client's silent default
    port is a guess about the cluster)."""
    for server in value.split(","):
        host, colon, port = server.strip().rpartition(":")
        if not colon and server.strip():
            raise ValueError(
                f"expected host:port[,host:port], {server.strip()!r} has no port (e.g. {server.strip()}:9092)"
            )
        if not server.strip() or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"expected host:port[,host:port], {server.strip()!r} is not host:port")
    return value


CommaSeparated = Annotated[tuple[str, ...], NoDecode, BeforeValidator(split_csv)]
HttpUrl = Annotated[str | None, AfterValidator(http_url)]
ReadableFile = Annotated[Path | None, AfterValidator(readable_file)]


def also_env(field: FieldInfo) -> str | None:
    """A variable a setting is also read from, without the prefix (`ANTHROPIC_API_KEY`, as the SDK reads it)."""
    extra = field.json_schema_extra
    value = extra.get("also_env") if isinstance(extra, dict) else None
    return value if isinstance(value, str) else None


def with_also_env(fields: dict[str, FieldInfo], data: Any) -> Any:
    """`data` (a slice's input, by setting name) with each setting that is missing read from its `also_env` variable."""
    if not isinstance(data, dict):
        return data
    found = {}
    for attr, field in fields.items():
        name, variable = setting_name(attr, field), also_env(field)
        if variable and name not in data and variable in os.environ:
            found[name] = os.environ[variable]
    return {**data, **found}


def variables(prefix: str, name: str, field: FieldInfo) -> tuple[str, ...]:
    """The environment variables of a setting: `<prefix><NAME>`, then its `also_env` variable if it has one."""
    extra = also_env(field)
    return (f"{prefix}{name.upper()}", *((extra,) if extra else ()))


def fields_by_setting(model: type[BaseSettings]) -> dict[str, FieldInfo]:
    """The fields of a settings model by the setting each carries (`setting_name`)."""
    return {setting_name(attr, field): field for attr, field in model.model_fields.items()}


_CONFLICT = "setting_conflict"


def setting_conflict(setting: str, value: Any, message: str) -> PydanticCustomError:
    """The error of a check across slices, raised in a validator of the model composing them: `setting` (a setting
    name) is the one `describe_error` names, `value` the value it shows."""
    return PydanticCustomError(_CONFLICT, "{message}", {"setting": setting, "value": value, "message": message})


def env_var(prefix: str, fields: Mapping[str, FieldInfo], key: str) -> str:
    """The environment variable of a setting, given its name (the location pydantic reports); of several variables
    (`MONITOR_ANTHROPIC_API_KEY`, `ANTHROPIC_API_KEY`), the one that is set."""
    field = fields.get(key.lower())
    if field is None:
        return f"{prefix}{key.upper()}"
    names = variables(prefix, key.lower(), field)
    return next((n for n in names if n in os.environ), names[0])


def _is_secret(fields: Mapping[str, FieldInfo], key: str) -> bool:
    field = fields.get(key.lower())
    return field is None or "SecretStr" in str(field.annotation)


def describe_error(
    err: ValidationError, prefix: str, fields: Mapping[str, FieldInfo], names: Mapping[str, str] | None = None
) -> str:
    """One line naming the first bad setting by its env var, e.g. `invalid setting MONITOR_SAMPLE_RATE: ...`;
    `fields` are the model's fields by setting name, `names` the setting name of each field that has an alias."""
    first = err.errors(include_url=False)[0]
    loc = [str(x) for x in first["loc"]]
    msg = first["msg"].removeprefix("Value error, ")
    if not loc:
        return f"invalid settings: {msg}"
    # A value given is located by its setting name; a default, by the field's own name.
    key, given = (names or {}).get(loc[0], loc[0]), first.get("input")
    if first["type"] == _CONFLICT:  # a check across slices: it names its setting itself
        key, given = first["ctx"]["setting"], first["ctx"]["value"]
    shown = (
        f" (got {given!r})"
        if given is not None and not isinstance(given, dict | list | SecretStr) and not _is_secret(fields, key)
        else ""
    )
    return f"invalid setting {env_var(prefix, fields, key)}: {msg}{shown}"


def check_unknown_env(prefix: str, known: Iterable[str]) -> None:
    """Refuse a `prefix` variable that is no setting, with the closest one as a hint (`did you mean ...?`)."""
    # A misspelt variable would otherwise be ignored silently and the default used.
    names = set(known)
    for var in sorted(os.environ):
        if var.startswith(prefix) and var not in names:
            close = difflib.get_close_matches(var, names, n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            raise ConfigError(f"unknown setting {var}{hint}")


def load_model(model: type[S], prefix: str, overrides: Mapping[str, Any]) -> S:
    """`model` from the environment with the `overrides` that are not None (by setting name); raises `ConfigError`
    naming the variable."""
    fields = fields_by_setting(model)
    names = {attr: setting_name(attr, field) for attr, field in model.model_fields.items()}
    try:
        return model(**{k: v for k, v in overrides.items() if v is not None})
    except ValidationError as e:
        raise ConfigError(describe_error(e, prefix, fields, names)) from None
    except SettingsError as e:  # a value pydantic-settings could not decode; its message quotes the field
        field = str(e).partition('field "')[2].partition('"')[0]
        raise ConfigError(
            f"invalid setting {env_var(prefix, fields, names.get(field, field))}: cannot be parsed"
        ) from None
