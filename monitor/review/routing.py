"""The review queue's routing rules: which routes feed the queue and in what shares, and what makes an item
borderline or a disagreement. Read from a YAML file (MONITOR_REVIEW_ROUTES) or the shipped `default_routes.yaml`;
pure, and a bad file is one `ConfigError` line naming the file and the field."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any, Literal, get_args

from schemas.config_files import config_text, yaml_document
from schemas.durations import parse_duration
from schemas.errors import ConfigError

Route = Literal["control", "disagree", "borderline", "firing"]
ROUTES: tuple[Route, ...] = get_args(Route)
DEFAULT_ROUTES_FILE = "default_routes.yaml"
_SHARE_TOLERANCE = 1e-6
_FIELDS = frozenset(
    {"shares", "disagree_levels", "borderline", "low_confidence", "second_review_share", "reserve_for", "window"}
)


def _default_shares() -> Mapping[Route, float]:
    return {"control": 0.2, "disagree": 0.3, "borderline": 0.3, "firing": 0.2}


@dataclass(frozen=True, slots=True)
class RoutingRules:
    """What the queue serves: each route's share, the thresholds of the targeted routes, the second-review share,
    how long a served item stays reserved and how old a judged row may be."""

    shares: Mapping[Route, float] = field(default_factory=_default_shares)
    disagree_levels: int = 2  # primary vs shadow rubric levels apart
    borderline: tuple[float, float] = (0.375, 0.625)  # score band (inclusive)
    low_confidence: float = 0.5  # or score_confidence below this
    second_review_share: float = 0.1  # items that need a second, different reviewer
    reserve_for: timedelta = timedelta(minutes=5)
    window: timedelta = timedelta(days=14)  # judged rows eligible for the queue


def load_routing(path: Path | None) -> RoutingRules:
    """The rules of the file at `path`, or the shipped defaults when None; raises `ConfigError` (one line)."""
    return parse_routing(*config_text(path, "monitor.review", DEFAULT_ROUTES_FILE, "review routes"))


def parse_routing(text: str, source: str = "routes") -> RoutingRules:
    """Rules from YAML text (fields left out keep their defaults); raises `ConfigError` naming `source` and the
    field."""
    data = yaml_document(text, source)
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: expected a mapping of routing fields (shares, window, ...)")
    for name in data:
        if name not in _FIELDS:
            raise ConfigError(f"{source}: unknown field {name!r} (known: {', '.join(sorted(_FIELDS))})")

    def bad(name: str, problem: str) -> ConfigError:
        return ConfigError(f"{source}: {name}: {problem}")

    defaults = RoutingRules()
    low, high = _band(data.get("borderline", defaults.borderline), bad)
    return RoutingRules(
        shares=_shares(data.get("shares", defaults.shares), bad),
        disagree_levels=_levels(data.get("disagree_levels", defaults.disagree_levels), bad),
        borderline=(low, high),
        low_confidence=_unit(data.get("low_confidence", defaults.low_confidence), "low_confidence", bad),
        second_review_share=_unit(
            data.get("second_review_share", defaults.second_review_share), "second_review_share", bad
        ),
        reserve_for=_duration(data.get("reserve_for", defaults.reserve_for), "reserve_for", bad),
        window=_duration(data.get("window", defaults.window), "window", bad),
    )


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


def _unit(value: Any, name: str, bad: Any) -> float:
    number = _number(value)
    if number is None or not 0 <= number <= 1:
        raise bad(name, f"expected a number from 0 to 1, got {value!r}")
    return number


def _shares(value: Any, bad: Any) -> Mapping[Route, float]:
    if not isinstance(value, Mapping):
        raise bad("shares", f"expected a mapping of route to share ({', '.join(ROUTES)})")
    shares: dict[Route, float] = {}
    for route, share in value.items():
        if route not in ROUTES:
            raise bad(f"shares.{route}", f"unknown route (known: {', '.join(ROUTES)})")
        shares[route] = _unit(share, f"shares.{route}", bad)
    if shares.get("control", 0.0) <= 0:
        raise bad("shares.control", "must be above 0: the unbiased slice, and the fallback of an empty route")
    total = sum(shares.values())
    if abs(total - 1.0) > _SHARE_TOLERANCE:
        raise bad("shares", f"the shares add up to {total:g}, not 1")
    return {route: shares.get(route, 0.0) for route in ROUTES}


def _levels(value: Any, bad: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 4:
        raise bad("disagree_levels", f"expected an integer from 1 to 4 (rubric levels apart), got {value!r}")
    return value


def _band(value: Any, bad: Any) -> tuple[float, float]:
    if not isinstance(value, list | tuple) or len(value) != 2:
        raise bad("borderline", f"expected [low, high] scores from 0 to 1, got {value!r}")
    low, high = (_unit(v, "borderline", bad) for v in value)
    if low > high:
        raise bad("borderline", f"low {low:g} is above high {high:g}")
    return low, high


def _duration(value: Any, name: str, bad: Any) -> timedelta:
    try:
        duration = parse_duration(value)
    except ValueError as e:
        raise bad(name, str(e)) from None
    if duration <= timedelta(0):
        raise bad(name, f"must be longer than 0, got {value!r}")
    return duration
