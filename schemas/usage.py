"""What one judging cost: tokens by kind and the estimated USD (None when the model's price is unknown)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Usage:
    """Tokens and estimated cost of one judged event (cost None when the model's price is unknown)."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cost_usd: float | None = 0.0

    @property
    def tokens(self) -> int:
        """All tokens, of every kind."""
        return self.input_tokens + self.output_tokens + self.cache_read_tokens + self.cache_write_tokens
