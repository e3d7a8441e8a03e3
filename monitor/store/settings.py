"""The store slice of the settings."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from monitor.store.urls import migrates_itself


@dataclass(frozen=True, slots=True)
class StoreSettings:
    """The store slice of the settings: where rows go, how to connect and authenticate (servers), whether rows
    carry the conversation text, the cluster of the DDL and whether `run` migrates the schema itself."""

    url: str
    database: str = "relevancy"
    table: str = "relevancy_scores"
    store_text: Literal["redacted", "none", "full"] = "redacted"
    retention_days: int | None = None  # scores, traffic and rollup rows, by event time; 0: forever; None: untouched
    text_retention_days: int = 0  # the text columns of the scores table only; 0: as long as the row
    user: str | None = None  # over a user in the URL
    password: str | None = field(default=None, repr=False)  # over a password in the URL
    ca_file: Path | None = None  # https: the CA of the server's certificate (default: the system's)
    verify: bool = True  # https: verify the server's certificate
    cluster: str | None = None  # DDL ON CLUSTER with Replicated engines
    auto_migrate: bool | None = None  # None: true for the embedded store (chdb:), false for a server

    @property
    def auto_migrates(self) -> bool:
        """Whether `run` applies pending migrations itself: `auto_migrate`, by default only for the embedded store."""
        return migrates_itself(self.url, self.auto_migrate)
