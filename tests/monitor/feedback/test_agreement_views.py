"""Where people see the judge against users: the `alerts check` block (per judge, all segments then each segment:
AUC [low, high] with disliked/liked counts, ρ [low, high] with its count), or its one line when no feedback was joined
to a judged answer; and the shared words for undefined figures."""

from __future__ import annotations

import argparse
import io
from datetime import timedelta

from monitor.cli.alerts import register, run_check
from monitor.feedback.agreement import AucFigure, RankFigure, auc_of, spearman_of
from monitor.feedback.agreement_text import auc_text, rho_text
from monitor.store.connection import ClickHouseStore
from tests.monitor.feedback.agreement_data import JUDGE, MONDAY, rating, scored, thumbs, write

NOW = MONDAY + timedelta(days=3)
HELP = "[bold]help[/bold]"  # a stored name that rich would read as markup


def _check(store: ClickHouseStore, *extra: str) -> str:
    parser = argparse.ArgumentParser(prog="relevancy-monitor")
    register(parser.add_subparsers(dest="command", required=True))
    flags = ["--clickhouse-url", store.url, "--clickhouse-database", store.database, "--at", NOW.isoformat()]
    ns = parser.parse_args(["alerts", "check", *flags, "--no-state", *extra])
    out = io.StringIO()
    assert run_check(ns, out) == 0
    return out.getvalue()


def test_alerts_check_prints_the_judge_against_users_per_judge_and_segment(store: ClickHouseStore) -> None:
    """With thumbs and ratings on judged answers of the last week, `alerts check` prints the judge's AUC and ρ over
    all segments and for each segment, with their intervals and counts, exactly as the figures compute them; older
    feedback is outside its week; a segment name is printed as it is stored, not read as console markup."""
    t = NOW - timedelta(days=1)
    scores = [0.2, 0.8, 0.7, 0.9, 0.6]
    rows = [scored(f"s{i}", s, t) for i, s in enumerate(scores)] + [scored("h1", 0.3, t, app=HELP)]
    feedback = [thumbs("s0", t, up=False), thumbs("s1", t, up=False), thumbs("s2", t, up=True)]
    feedback += [thumbs("s3", t, up=True), thumbs("h1", t, up=False, app=HELP)]
    feedback += [rating(f"s{i}", t, r) for i, r in enumerate([1, 3, 4, 5, 2])]
    feedback += [thumbs("s4", NOW - timedelta(days=8), up=False)]  # before the week `alerts check` reads
    write(store, rows, feedback)
    text = _check(store)
    assert max(len(line) for line in text.splitlines()) <= 80  # the block wraps to the console like the tables
    words = " ".join(text.split())
    assert "judge against users: feedback given 2026-10-29 09:00 – 2026-11-05 09:00 UTC" in words
    everything = f"{auc_text(auc_of([0.2, 0.8, 0.3], [0.7, 0.9]))} · {rho_text(spearman_of(scores, [1, 3, 4, 5, 2]))}"
    assert f"judge {JUDGE}, all segments {everything}" in words, text
    assert everything.startswith("AUC 0.83 [") and "n 3/2 disliked/liked · ρ 0.90 [" in everything
    shop = f"{auc_text(auc_of([0.2, 0.8], [0.7, 0.9]))} · {rho_text(spearman_of(scores, [1, 3, 4, 5, 2]))}"
    assert f"app=shop model=m1 prompt_version=v1 {shop}" in words
    assert (
        f"app={HELP} model=m1 prompt_version=v1 AUC — (no liked) n 1/0 disliked/liked · ρ — (no ratings) n 0" in words
    )
    assert text.index("judge against users") > text.index("alert rules at")


def test_alerts_check_says_in_one_line_when_no_feedback_was_joined(store: ClickHouseStore) -> None:
    """Feedback on an answer nobody judged (and a shadow judge's row) gives one line, not an empty block; --json
    keeps its one object per rule and segment, without the block."""
    t = NOW - timedelta(days=1)
    write(store, [scored("x", 0.5, t, judge_id="shadow-1", sample_rule="shadow:base")], [thumbs("x", t, up=False)])
    text = _check(store)
    assert max(len(line) for line in text.splitlines()) <= 80
    assert text.count("judge against users") == 1
    assert (
        "judge against users: no feedback given 2026-10-29 09:00 – 2026-11-05 09:00 UTC was joined to a judged "
        "answer" in " ".join(text.split())
    )
    assert "judge against users" not in _check(store, "--json")


def test_undefined_figures_say_why() -> None:
    """A dash and the reason: no thumbs, no liked, no disliked; no ratings, fewer than 4, or no spread."""
    assert auc_text(AucFigure(None, None, None, 0, 0)) == "AUC — (no thumbs) n 0/0 disliked/liked"
    assert auc_text(AucFigure(None, None, None, 0, 4)) == "AUC — (no disliked) n 0/4 disliked/liked"
    assert rho_text(RankFigure(None, None, None, 3)) == "ρ — (fewer than 4 ratings) n 3"
    assert rho_text(RankFigure(None, None, None, 9)) == "ρ — (scores or ratings all equal) n 9"
    assert auc_text(AucFigure(0.75, 0.5, 1.0, 2, 3)) == "AUC 0.75 [0.50, 1.00] n 2/3 disliked/liked"
