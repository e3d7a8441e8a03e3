"""What a store URL names: an embedded chDB directory (`chdb:///dir`) or a server (`http(s)://`), and how to connect."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

# chdb:// locations clickhouse-connect keeps in memory rather than on disk.
_MEMORY_LOCATIONS = frozenset({"", "memory", ":memory:"})


def migrates_itself(url: str, auto_migrate: bool | None) -> bool:
    """`auto_migrate` if set, else true for the embedded store (nobody else would migrate it) and false for a server."""
    return url.startswith("chdb:") if auto_migrate is None else auto_migrate


def chdb_directory(url: str) -> Path | None:
    """The absolute directory of an embedded `chdb:` URL, relative paths resolved against the working directory;
    None for a server URL or an in-memory engine."""
    if not url.startswith("chdb:"):
        return None
    location = url.removeprefix("chdb:").partition("?")[0]
    # `chdb:///abs/dir` leaves `/abs/dir`; `chdb://relative/dir` and `chdb:relative` leave a relative path (the
    # driver would read `relative` as the location and `dir` as a database, then fail and leave `relative/` behind).
    location = location.removeprefix("//")
    if location in _MEMORY_LOCATIONS:
        return None
    return Path(os.path.abspath(os.path.expanduser(location)))


def normalize_url(url: str) -> str:
    """`url` with an embedded store's directory made absolute (`chdb:///abs/dir?options`); other URLs unchanged."""
    directory = chdb_directory(url)
    if directory is None:
        return url
    _, sep, options = url.partition("?")
    return f"chdb://{directory}{sep}{options}"


def safe_url(url: str) -> str:
    """`url` without the credentials it may carry, for messages and logs."""
    scheme, sep, rest = url.partition("://")
    return f"{scheme}://{rest.rpartition('@')[2]}" if sep else url


def client_options(
    url: str, user: str | None = None, password: str | None = None, ca_file: Path | None = None, verify: bool = True
) -> dict[str, Any]:
    """The keyword arguments of `clickhouse_connect.get_client` for a server URL: the interface its scheme names
    (clickhouse-connect reads only host, port, user and password from the URL: https://host:8123 would be plain
    http), credentials (over those in the URL) and, for https, certificate verification and the CA; none for chdb."""
    if url.startswith("chdb:"):
        return {}
    options: dict[str, Any] = {"interface": "https" if url.startswith("https://") else "http"}
    if user is not None:
        options["username"] = user
    if password is not None:
        options["password"] = password
    if url.startswith("https://"):
        options["verify"] = verify
        if ca_file is not None and verify:
            options["ca_cert"] = str(ca_file)
    return options


def redact_url(url: str) -> str:
    """`url` with the password of its credentials, if any, hidden (`http://user:***@host`)."""
    scheme, sep, rest = url.partition("://")
    if sep and "@" in rest:
        creds, _, host = rest.rpartition("@")
        user = creds.split(":", 1)[0]
        return f"{scheme}://{user}:***@{host}"
    return url
