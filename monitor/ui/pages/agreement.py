"""The agreement page (pure): per judge, κ on the control slice and on everything side by side with their intervals
and counts, the confusion table, κ week by week and the disagreements; the reviewers' κ with each other; and each
judge against users' own thumbs and ratings (AUC and ρ, as the report and `alerts check` show them)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from monitor.alerts.links import answer_path
from monitor.calibration.agreement import Statistic
from monitor.feedback.agreement_queries import JudgeUserAgreement
from monitor.report.judge_users import JudgeUserRow, overall_rows, weekly_rows
from monitor.review.agreement import AgreementReport, Disagreement, JudgeAgreement

DEFAULT_SPAN = timedelta(days=14)
LEVELS = (0, 1, 2, 3, 4)


@dataclass(frozen=True, slots=True)
class DisagreementLink:
    """One disagreement and the link to its answer."""

    item: Disagreement
    href: str


@dataclass(frozen=True, slots=True)
class WeekRow:
    """κ of one week."""

    week: str
    kappa: str
    n: int


@dataclass(frozen=True, slots=True)
class JudgeSection:
    """One judge's section."""

    judge_id: str
    control: str
    everything: str
    confusion: tuple[tuple[int, tuple[int, ...]], ...]  # (human level, counts by judge level)
    weekly: tuple[WeekRow, ...]
    too_strict: tuple[DisagreementLink, ...]
    too_lenient: tuple[DisagreementLink, ...]


@dataclass(frozen=True, slots=True)
class AgreementPage:
    """The whole page."""

    since: datetime
    until: datetime
    labels: int
    judges: tuple[JudgeSection, ...]
    human: str
    human_items: int
    users: tuple[JudgeUserRow, ...] = ()  # each judge against users' feedback over the range, all segments first
    users_weekly: tuple[JudgeUserRow, ...] = ()
    feedback_table: bool = True  # False: the schema predates the feedback table (migration 046)


def kappa_text(s: Statistic, n: int) -> str:
    """`0.71 [0.55, 0.84] n=40`, or `— (why)` when κ is undefined."""
    if s.value is None:
        return f"— ({s.undefined or 'no labels'}) n={n}"
    interval = f" [{s.ci[0]:.2f}, {s.ci[1]:.2f}]" if s.ci is not None else ""
    return f"{s.value:.2f}{interval} n={n}"


def _links(items: tuple[Disagreement, ...], judge_id: str) -> tuple[DisagreementLink, ...]:
    return tuple(DisagreementLink(d, answer_path(d.event_id, judge_id)) for d in items)


def _section(j: JudgeAgreement) -> JudgeSection:
    return JudgeSection(
        j.judge_id,
        kappa_text(j.control, j.n_control),
        kappa_text(j.everything, j.n_everything),
        tuple((level, tuple(row)) for level, row in zip(LEVELS, j.confusion, strict=False)),
        tuple(WeekRow(w.week.isoformat(), kappa_text(w.kappa, w.n), w.n) for w in j.weekly),
        _links(j.too_strict, j.judge_id),
        _links(j.too_lenient, j.judge_id),
    )


def build_agreement(report: AgreementReport, users: Sequence[JudgeUserAgreement] | None = ()) -> AgreementPage:
    """The page of an agreement report, and of the judges against users' feedback of the same range (None: the
    store has no feedback table)."""
    return AgreementPage(
        report.since,
        report.until,
        report.labels,
        tuple(_section(j) for j in report.judges),
        kappa_text(report.humans.kappa, report.humans.items),
        report.humans.items,
        tuple(overall_rows(users or ())),
        tuple(weekly_rows(users or ())),
        users is not None,
    )
