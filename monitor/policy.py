"""Building the sampling and budget policies from settings."""

from __future__ import annotations

from consumers.sampling import Sampler, SamplingConfigError, SamplingPolicy
from monitor.budget import FreshnessGovernor, Limits, SpendBudget
from monitor.config import ConfigError, Settings


def build_sampler(settings: Settings) -> Sampler:
    """The sampler: the rules file if set, else the base rate; raises `ConfigError` on a bad file."""
    if settings.sampling_file is None:
        return Sampler.at_rate(settings.sample_rate, settings.sample_key)
    try:
        return Sampler(SamplingPolicy.from_yaml(settings.sampling_file, settings.sample_rate, settings.sample_key))
    except SamplingConfigError as e:
        raise ConfigError(f"invalid setting MONITOR_SAMPLING_FILE: {e}") from None


def build_budget(settings: Settings) -> SpendBudget:
    """The spend budget from the per-hour and per-day caps."""
    return SpendBudget(
        per_hour=Limits(settings.budget_requests_per_hour, settings.budget_tokens_per_hour, settings.budget_usd_per_hour),
        per_day=Limits(settings.budget_requests_per_day, settings.budget_tokens_per_day, settings.budget_usd_per_day),
        soft_limit=settings.budget_soft_limit,
    )


def build_freshness(settings: Settings) -> FreshnessGovernor:
    """The freshness governor from the lag threshold."""
    return FreshnessGovernor(settings.freshness_max_lag, settings.freshness_min_factor)
