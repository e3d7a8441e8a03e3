"""Redaction quality on the labelled sets of `monitor.devtools.pii_samples`: recall per kind, look-alikes kept and
µs per text of the built-in redactor, and how far redaction moves relevancy scores (lexical judge), with the
targets of issue 12 next to each figure. Run: `python -m bench.redaction_quality`."""

from __future__ import annotations

import asyncio
import statistics

from monitor.devtools.pii_samples import labelled_texts, relevancy_cases
from monitor.devtools.redaction_eval import evaluate, format_evaluation
from monitor.judges.lexical import LexicalJudge
from monitor.privacy.redactor import build_redactor
from monitor.privacy.settings import RedactionSettings

RECALL_TARGET, PER_KIND_TARGET, BENIGN_TARGET = 0.98, 0.95, 0.98


async def score_shift() -> tuple[float, float, dict[str, tuple[float, float]]]:
    """(mean absolute shift, largest shift, {label: (mean before, mean after)}) of lexical scores on the relevancy
    set."""
    judge, redactor = LexicalJudge(), build_redactor(RedactionSettings())
    shifts: list[float] = []
    by_label: dict[str, list[tuple[float, float]]] = {}
    for case in relevancy_cases(0):
        before = (await judge.judge(case.question, case.response)).score
        after = (await judge.judge(redactor.redact(case.question).text, redactor.redact(case.response).text)).score
        shifts.append(abs(after - before))
        by_label.setdefault(case.label, []).append((before, after))
    means = {
        label: (statistics.fmean(b for b, _ in pairs), statistics.fmean(a for _, a in pairs))
        for label, pairs in by_label.items()
    }
    return statistics.fmean(shifts), max(shifts), means


def main() -> None:
    """Print the evaluation, the misses and the score shift."""
    e = evaluate(build_redactor(RedactionSettings()), labelled_texts(0), timing_runs=5)
    print(format_evaluation("built-in redactor (validated recognizers)", e))
    worst = min(e.per_kind, key=lambda k: k.typed_share)
    print(
        f"  targets: recall {e.recall:.3f} >= {RECALL_TARGET}, worst kind {worst.kind} {worst.typed_share:.3f} "
        f">= {PER_KIND_TARGET}, look-alikes {e.benign_share:.3f} >= {BENIGN_TARGET}"
    )
    for kind, fmt, value in e.missed[:20]:
        print(f"  missed {kind:<16} {fmt:<24} {value[:60]!r}")
    for value in e.harmed[:20]:
        print(f"  look-alike redacted: {value[:60]!r}")
    mean, largest, means = asyncio.run(score_shift())
    print(f"lexical score shift from redaction: mean |Δ| {mean:.4f}, largest {largest:.3f}")
    for label, (before, after) in sorted(means.items()):
        print(f"  {label:<10} mean score {before:.3f} -> {after:.3f}")


if __name__ == "__main__":
    main()
