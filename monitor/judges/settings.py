"""What the judges need from the configuration: the method, the model, the API client and the prompt limits."""

from __future__ import annotations

from dataclasses import dataclass, field

from monitor.judges.pricing import DEFAULT_PRICES, ModelPrice


@dataclass(frozen=True, slots=True)
class JudgeSettings:
    """The judge slice of the settings (built by `monitor.config.Settings.judge_client`)."""

    method: str = "lexical"
    model: str = "claude-haiku-5-5"
    api_key: str | None = field(default=None, repr=False)
    base_url: str | None = None
    request_timeout_s: float = 20.0
    max_retries: int = 3
    max_tokens: int = 1024
    max_input_chars: int = 20_000
    statements_strict_threshold: float | None = None
    prices: dict[str, ModelPrice] = field(default_factory=lambda: dict(DEFAULT_PRICES))

    @property
    def price(self) -> ModelPrice | None:
        """The configured model's price, or None when unknown (its rows then carry no cost)."""
        return self.prices.get(self.model)
