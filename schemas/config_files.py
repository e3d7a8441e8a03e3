"""Reading the YAML files a user may give in place of the shipped ones (alert rules, review routes): the file or
the packaged default, and its YAML, each failure one line naming the file (and the line for bad YAML)."""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from schemas.errors import ConfigError


def config_text(
    path: str | Path | None, package: str, shipped: str, kind: str, error: type[ConfigError] = ConfigError
) -> tuple[str, str]:
    """The text of the file at `path` (or, when None, of the file `shipped` in `package`) and its name for messages;
    raises `error` ("cannot read {kind} file ...") when the file cannot be read."""
    if path is None:
        return (resources.files(package) / shipped).read_text(encoding="utf-8"), shipped
    try:
        return Path(path).read_text(encoding="utf-8"), str(path)
    except OSError as e:
        raise error(f"cannot read {kind} file {path}: {e.strerror or e}") from None


def yaml_document(text: str, source: str, error: type[ConfigError] = ConfigError) -> Any:
    """The YAML document of `text`; raises `error` naming `source` and the line of the first problem."""
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        raise error(f"{source}:{where} not valid YAML: {getattr(e, 'problem', None) or e}") from None
