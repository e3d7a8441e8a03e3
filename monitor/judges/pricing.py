"""Judge model prices: USD per million tokens, and the estimated cost of one call (or of one batched request)."""

from __future__ import annotations

import re

from pydantic import BaseModel, Field

# The Message Batches API bills every token kind at half the list price; the discount stacks with the prompt-cache
# multipliers (a cache read in a batch costs half a list cache read). Checked 2026-11-29.
BATCH_DISCOUNT = 0.5


class ModelPrice(BaseModel):
    """USD per million tokens of one model."""

    input: float = Field(ge=0)
    output: float = Field(ge=0)
    cache_read: float = Field(ge=0)
    cache_write: float = Field(ge=0)
    call: float = Field(0.0, ge=0, description="USD per call on top of the tokens (a self-hosted server's share)")

    def cost(self, input_tokens: int, output_tokens: int, cache_read_tokens: int, cache_write_tokens: int) -> float:
        """Estimated USD for one call (input_tokens excludes cached tokens, as the API reports it)."""
        return (
            input_tokens * self.input
            + output_tokens * self.output
            + cache_read_tokens * self.cache_read
            + cache_write_tokens * self.cache_write
        ) / 1_000_000 + self.call

    @classmethod
    def per_call(cls, usd: float) -> ModelPrice:
        """A flat price per call (a self-hosted server's hourly cost over its calls an hour), whatever the tokens."""
        return cls(input=0.0, output=0.0, cache_read=0.0, cache_write=0.0, call=usd)

    def batch_cost(
        self, input_tokens: int, output_tokens: int, cache_read_tokens: int, cache_write_tokens: int
    ) -> float:
        """Estimated USD for one request of a Message Batch: `cost` with `BATCH_DISCOUNT` applied."""
        return self.cost(input_tokens, output_tokens, cache_read_tokens, cache_write_tokens) * BATCH_DISCOUNT


# Published list prices (USD / MTok, prompts under 100K tokens, 5-minute cache writes), checked 2026-11-29.
# A model missing here gets cost_usd NULL, never a guessed number; add it with MONITOR_JUDGE_PRICES.
DEFAULT_PRICES: dict[str, ModelPrice] = {
    "claude-haiku-5-5": ModelPrice(input=0.10, output=0.50, cache_read=0.01, cache_write=0.125),
    "claude-sonnet-5-5": ModelPrice(input=2.0, output=10.0, cache_read=0.2, cache_write=2.5),
    "claude-opus-5-5": ModelPrice(input=4.0, output=20.0, cache_read=0.4, cache_write=5.0),
    "claude-haiku-4-5": ModelPrice(input=1.0, output=5.0, cache_read=0.1, cache_write=1.25),
    "claude-sonnet-4-5": ModelPrice(input=3.0, output=15.0, cache_read=0.3, cache_write=3.75),
}


# "claude-haiku-4-5-20251001", "claude-haiku-4-5@20251001" (Vertex), "us.anthropic.claude-haiku-4-5-20251001-v1:0"
# (a Bedrock inference profile), "-latest": each platform decorates the same model's name its own way.
_DECORATIONS = re.compile(r"^(?:[a-z]+\.)*(?P<base>claude-[a-z0-9-]+?)(?:[-@]\d{8})?(?:-latest)?(?:-v\d+:\d+)?$")


def canonical_model(model: str) -> str:
    """The model's name without a platform's decorations (date suffix, region and vendor prefixes, version tag), so
    that prices and cache minimums are found for a Bedrock or Vertex id; any other name unchanged (lower case)."""
    name = model.strip().lower()
    match = _DECORATIONS.match(name)
    return match.group("base") if match else name
