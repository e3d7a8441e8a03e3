"""How many examples a property test draws: its full count under `HYPOTHESIS_PROFILE=thorough`, a fifth of it by
default (the `quick` profile, what `make test` runs), so every property runs on every change and all its examples
when asked. tests/conftest.py loads the profile."""

from __future__ import annotations

import os

from hypothesis import settings

QUICK, THOROUGH = "quick", "thorough"
QUICK_SHARE = 5  # the quick profile draws 1/QUICK_SHARE of each test's full count


def profile() -> str:
    """The profile `HYPOTHESIS_PROFILE` names, `quick` when unset."""
    return os.environ.get("HYPOTHESIS_PROFILE", QUICK)


def load_profile() -> str:
    """Register both profiles (no deadline: a loaded machine must not fail a property) and load `profile()`."""
    settings.register_profile(QUICK, deadline=None)
    settings.register_profile(THOROUGH, deadline=None)
    settings.load_profile(profile())
    return profile()


def examples(full: int) -> int:
    """`full` under the thorough profile; otherwise a fifth of it, and at least 50."""
    return full if profile() == THOROUGH else max(50, full // QUICK_SHARE)
