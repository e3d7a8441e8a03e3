"""The report's "Judge against users" section (pure): how well each judge's score predicts users' thumbs (AUC) and
ratings (Spearman's ρ) over the range and week by week, as table rows and as a weekly chart of the AUC with its
interval. The figures are `monitor.feedback.agreement_queries`'s, written as `alerts check` and the UI write them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from monitor.feedback.agreement_queries import JudgeUserAgreement
from monitor.feedback.agreement_text import auc_counts, auc_value, rho_value, segment_name
from monitor.report.charts import MAX_LINES, Chart, Line, Panel

CHART_KEY = "judge_users"
WEEK = timedelta(days=7)


@dataclass(frozen=True, slots=True)
class JudgeUserRow:
    """One judge and segment (or all segments), over the range or one week (`week`: its Monday, '' for the range)."""

    judge_id: str
    segment: str
    week: str
    auc: str
    auc_counts: str
    rho: str
    ratings: int


def _row(a: JudgeUserAgreement) -> JudgeUserRow:
    week = a.week.isoformat() if a.week is not None else ""
    return JudgeUserRow(
        a.judge_id, segment_name(a), week, auc_value(a.auc), auc_counts(a.auc), rho_value(a.spearman), a.spearman.n
    )


def overall_rows(agreement: Sequence[JudgeUserAgreement]) -> list[JudgeUserRow]:
    """Each judge over the whole range: all segments first, then each segment."""
    return [_row(a) for a in agreement if a.week is None]


def weekly_rows(agreement: Sequence[JudgeUserAgreement]) -> list[JudgeUserRow]:
    """Each judge week by week: all segments first, then each segment, oldest week first."""
    return [_row(a) for a in agreement if a.week is not None]


def judge_user_chart(agreement: Sequence[JudgeUserAgreement]) -> Chart | None:
    """Per judge, the AUC over all segments week by week with its 95 % interval as a band; None when no week has
    an AUC."""
    weekly = [a for a in agreement if a.all_segments and a.week is not None and a.auc.auc is not None]
    if not weekly:
        return None
    weeks = sorted({a.week for a in weekly if a.week is not None})
    grid = tuple(datetime(w.year, w.month, w.day, tzinfo=UTC) for w in weeks)
    judges = list(dict.fromkeys(a.judge_id for a in weekly))
    lines = []
    for judge in judges[:MAX_LINES]:
        own = {a.week: a.auc for a in weekly if a.judge_id == judge}
        values = tuple(f.auc if (f := own.get(w)) is not None else None for w in weeks)
        bands = tuple(
            (f.low, f.high) if (f := own.get(w)) is not None and f.low is not None and f.high is not None else None
            for w in weeks
        )
        lines.append(Line(f"{judge} · AUC", values, judge, joined=True, bands=bands))
    return Chart(
        CHART_KEY,
        "judge against users: AUC of the score for thumbs, per week",
        grid,
        int(WEEK.total_seconds()),
        (grid[0], grid[-1] + WEEK),
        (Panel("AUC (0.5: chance)", tuple(lines), y_max=1.0),),
        omitted=tuple(judges[MAX_LINES:]),
        day_ticks=True,
    )
