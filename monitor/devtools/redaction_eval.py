"""Measuring a redactor on a labelled set: recall per kind, the share of look-alikes kept, and time per text.

A planted item is *removed* when its value no longer occurs in the redacted text, and *typed* when, besides, the
placeholder of its kind does. A look-alike is *kept* when it still occurs verbatim."""

from __future__ import annotations

import statistics
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from monitor.devtools.pii_samples import Planted
from monitor.privacy.kinds import placeholder
from monitor.privacy.spans import Redactor


@dataclass(frozen=True, slots=True)
class LabelledText:
    """A chat text, the personal data that must be removed from it, and the look-alikes that must survive verbatim."""

    text: str
    planted: tuple[Planted, ...]
    benign: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class KindRecall:
    """Planted items of one kind, and how many were removed and how many replaced by the right placeholder."""

    kind: str
    planted: int
    removed: int
    typed: int

    @property
    def removed_share(self) -> float:
        """Share of the items no longer in the text."""
        return self.removed / self.planted if self.planted else 1.0

    @property
    def typed_share(self) -> float:
        """Share of the items replaced by their own kind's placeholder."""
        return self.typed / self.planted if self.planted else 1.0


@dataclass(frozen=True, slots=True)
class Evaluation:
    """A redactor's recall per kind, look-alikes kept, the items it missed, and µs per text (median of the runs)."""

    per_kind: tuple[KindRecall, ...]
    benign: int
    benign_kept: int
    missed: tuple[tuple[str, str, str], ...]  # (kind, format, value)
    harmed: tuple[str, ...]  # look-alikes that did not survive
    us_per_text: float

    @property
    def recall(self) -> float:
        """Typed recall over every planted item."""
        planted = sum(k.planted for k in self.per_kind)
        return sum(k.typed for k in self.per_kind) / planted if planted else 1.0

    @property
    def benign_share(self) -> float:
        """Share of the look-alikes kept verbatim."""
        return self.benign_kept / self.benign if self.benign else 1.0


def evaluate(redactor: Redactor, texts: Sequence[LabelledText], timing_runs: int = 3) -> Evaluation:
    """Redact every text once for the counts, then `timing_runs` more times for the time per text."""
    planted: Counter[str] = Counter()
    removed: Counter[str] = Counter()
    typed: Counter[str] = Counter()
    missed: list[tuple[str, str, str]] = []
    harmed: list[str] = []
    benign = kept = 0
    for item in texts:
        out = redactor.redact(item.text).text
        for p in item.planted:
            planted[p.kind] += 1
            gone = p.value not in out
            removed[p.kind] += gone
            right = gone and placeholder(p.kind) in out
            typed[p.kind] += right
            if not right:
                missed.append((p.kind, p.fmt, p.value))
        for value in item.benign:
            benign += 1
            if value in out:
                kept += 1
            else:
                harmed.append(value)
    per_kind = tuple(KindRecall(k, planted[k], removed[k], typed[k]) for k in sorted(planted))
    return Evaluation(per_kind, benign, kept, tuple(missed), tuple(harmed), _us_per_text(redactor, texts, timing_runs))


def _us_per_text(redactor: Redactor, texts: Sequence[LabelledText], runs: int) -> float:
    if runs <= 0 or not texts:
        return 0.0
    timings = []
    for _ in range(runs):
        started = time.perf_counter()
        for item in texts:
            redactor.redact(item.text)
        timings.append((time.perf_counter() - started) / len(texts) * 1e6)
    return statistics.median(timings)


def format_evaluation(name: str, e: Evaluation) -> str:
    """A plain-text table of `e` (kind, planted, removed, typed recall as a share and as typed/planted), then
    look-alikes kept and µs per text."""
    lines = [f"{name}", f"  {'kind':<16}{'planted':>8}{'removed':>10}{'typed':>8}{'typed/planted':>16}"]
    for k in e.per_kind:
        counts = f"{k.typed}/{k.planted}"
        lines.append(f"  {k.kind:<16}{k.planted:>8}{k.removed_share:>10.3f}{k.typed_share:>8.3f}{counts:>16}")
    planted = sum(k.planted for k in e.per_kind)
    counts = f"{sum(k.typed for k in e.per_kind)}/{planted}"
    lines.append(f"  {'all':<16}{planted:>8}{'':>10}{e.recall:>8.3f}{counts:>16}")
    lines.append(
        f"  look-alikes kept {e.benign_kept}/{e.benign} = {e.benign_share:.3f};  {e.us_per_text:.1f} µs per text"
    )
    return "\n".join(lines)
