"""The redaction slice of the settings."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

# Regions whose national phone formats (no +country code) are recognised; numbers written with +country code are
# recognised for every region.
DEFAULT_PHONE_REGIONS: tuple[str, ...] = ("US", "GB", "DE", "FR")


@dataclass(frozen=True, slots=True)
class RedactionSettings:
    """How text is redacted before the judge and the store: the user's own patterns (kind name to regular
    expression), values never redacted, and the regions of national phone formats."""

    patterns: Mapping[str, str] = field(default_factory=dict)
    allow: tuple[str, ...] = ()
    phone_regions: tuple[str, ...] = DEFAULT_PHONE_REGIONS
