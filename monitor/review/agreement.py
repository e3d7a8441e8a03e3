"""How far each judge agrees with the reviewers, and the reviewers with each other, over the labels of a period.

Every label is paired with every judge's ok scored row of the same event (so a shadow judge gets its κ too), one
pair per label row, in the order of (event_id, reviewer): the figures repeat. κ is quadratic-weighted on the
rubric's five levels with a percentile bootstrap interval (`monitor.calibration.agreement.weighted_kappa`, as
`calibrate` reports it): the reviewer's label 0–4 against the judge's level `bucket(score)`. It is reported on the
control slice (labels whose route is `control`: a uniform random draw, so an unbiased estimate of agreement on the
traffic) and on everything (biased toward the hard items the targeted routes pick), side by side.

Human against human: over the items two different reviewers labelled, the first two reviewers' labels (by name).
Disagreements are per item: the judge's level at least two levels below the reviewers' mean label (too strict) or
above it (too lenient), the widest gap first."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta

from monitor.calibration.agreement import BUCKETS, DEFAULT_BOOTSTRAP, Bootstrap, Statistic, bucket, weighted_kappa
from monitor.review.label_rows import LABELS_TABLE, StoredLabel, read_labels
from monitor.store.connection import ClickHouseStore

CONTROL = "control"
DISAGREEMENT_LEVELS = 2  # a judge this many levels from the reviewers' mean is listed
TOP_DISAGREEMENTS = 20
_TS = "DateTime64(3, 'UTC')"


@dataclass(frozen=True, slots=True)
class WeekKappa:
    """κ over the labels written in one ISO week (`week`: its Monday)."""

    week: date
    kappa: Statistic
    n: int


@dataclass(frozen=True, slots=True)
class Disagreement:
    """An item on which a judge's level is two or more from the reviewers' mean label."""

    event_id: str
    app: str
    judge_level: int
    human_level: float
    reviewers: int


@dataclass(frozen=True, slots=True)
class JudgeAgreement:
    """One judge against the reviewers: κ on the control slice and on everything, the 5×5 confusion (rows the
    reviewer's level, columns the judge's), κ week by week, and the items it judges too strictly or too leniently."""

    judge_id: str
    control: Statistic
    n_control: int
    everything: Statistic
    n_everything: int
    confusion: tuple[tuple[int, ...], ...]
    weekly: tuple[WeekKappa, ...]
    too_strict: tuple[Disagreement, ...]
    too_lenient: tuple[Disagreement, ...]


@dataclass(frozen=True, slots=True)
class HumanAgreement:
    """Reviewers against each other over `items` items labelled by two different reviewers."""

    kappa: Statistic
    items: int


@dataclass(frozen=True, slots=True)
class AgreementReport:
    """Every judge's agreement with the `labels` labels written in [since, until), and the reviewers' own."""

    since: datetime
    until: datetime
    labels: int
    judges: tuple[JudgeAgreement, ...]
    humans: HumanAgreement


@dataclass(frozen=True, slots=True)
class Pair:
    """One label and one judge's score of the same event."""

    label: StoredLabel
    score: float


def agreement_report(
    store: ClickHouseStore, since: datetime, until: datetime, boot: Bootstrap = DEFAULT_BOOTSTRAP
) -> AgreementReport:
    """The report over the labels written in [since, until) (read with FINAL) and the judges' scored rows."""
    labels = read_labels(store, since, until)
    scores = judge_scores(store, since, until)
    return build_report(labels, scores, since, until, boot)


def judge_scores(store: ClickHouseStore, since: datetime, until: datetime) -> dict[str, dict[str, float]]:
    """{judge_id: {event_id: score}} of every judge's ok row of the events labelled in [since, until) (a judge's
    latest scoring when it has rows in two apps)."""
    sql = (
        f"SELECT judge_id, event_id, argMax(score, scored_at) FROM {store.qualified_table} FINAL\n"
        f"WHERE status = 'ok' AND event_id IN (SELECT event_id FROM {store.database}.{LABELS_TABLE}\n"
        f"  WHERE labelled_at >= {{since:{_TS}}} AND labelled_at < {{until:{_TS}}})\n"
        "GROUP BY judge_id, event_id"
    )
    out: dict[str, dict[str, float]] = {}
    for judge_id, event_id, score in store.query(sql, {"since": since, "until": until}).rows:
        if score is not None:
            out.setdefault(str(judge_id), {})[str(event_id)] = float(score)
    return out


def build_report(
    labels: Sequence[StoredLabel],
    scores: dict[str, dict[str, float]],
    since: datetime,
    until: datetime,
    boot: Bootstrap = DEFAULT_BOOTSTRAP,
) -> AgreementReport:
    """The report from labels ordered by (event_id, reviewer) and {judge_id: {event_id: score}} (pure)."""
    ordered = sorted(labels, key=lambda lab: (lab.event_id, lab.reviewer))
    judges = tuple(
        judge_agreement(judge_id, judge_pairs(ordered, scores[judge_id]), boot) for judge_id in sorted(scores)
    )
    return AgreementReport(since, until, len(ordered), judges, human_agreement(ordered, boot))


def judge_pairs(labels: Sequence[StoredLabel], scores: dict[str, float]) -> list[Pair]:
    """Each label with the judge's score of its event, in the labels' order (labels of events it did not score are
    left out)."""
    return [Pair(lab, scores[lab.event_id]) for lab in labels if lab.event_id in scores]


def kappa_of(pairs: Sequence[Pair], boot: Bootstrap) -> Statistic:
    """Quadratic-weighted κ of the labels against the judge's levels, with the bootstrap interval."""
    return weighted_kappa([p.label.label for p in pairs], [bucket(p.score) for p in pairs], boot=boot)


def judge_agreement(judge_id: str, pairs: Sequence[Pair], boot: Bootstrap) -> JudgeAgreement:
    """Every figure of one judge over its pairs."""
    control = [p for p in pairs if p.label.route == CONTROL]
    table = [[0] * BUCKETS for _ in range(BUCKETS)]
    for p in pairs:
        table[p.label.label][bucket(p.score)] += 1
    strict, lenient = disagreements(pairs)
    return JudgeAgreement(
        judge_id=judge_id,
        control=kappa_of(control, boot),
        n_control=len(control),
        everything=kappa_of(pairs, boot),
        n_everything=len(pairs),
        confusion=tuple(tuple(row) for row in table),
        weekly=weekly(pairs, boot),
        too_strict=strict,
        too_lenient=lenient,
    )


def iso_week(t: datetime) -> date:
    """The Monday of `t`'s ISO week (in UTC)."""
    day = t.date()
    return day - timedelta(days=day.weekday())


def weekly(pairs: Sequence[Pair], boot: Bootstrap) -> tuple[WeekKappa, ...]:
    """κ per ISO week of labelled_at, oldest first."""
    by: dict[date, list[Pair]] = {}
    for p in pairs:
        by.setdefault(iso_week(p.label.labelled_at), []).append(p)
    return tuple(WeekKappa(week, kappa_of(by[week], boot), len(by[week])) for week in sorted(by))


def disagreements(
    pairs: Sequence[Pair], top: int = TOP_DISAGREEMENTS
) -> tuple[tuple[Disagreement, ...], tuple[Disagreement, ...]]:
    """(too strict, too lenient): the items whose judge level is `DISAGREEMENT_LEVELS` or more below (above) the
    reviewers' mean label, the widest gap first, then by event id; at most `top` each."""
    by: dict[str, list[Pair]] = {}
    for p in pairs:
        by.setdefault(p.label.event_id, []).append(p)
    strict: list[tuple[float, Disagreement]] = []
    lenient: list[tuple[float, Disagreement]] = []
    for event_id, group in by.items():
        human = sum(p.label.label for p in group) / len(group)
        level = bucket(group[0].score)
        item = Disagreement(event_id, group[0].label.app, level, human, len(group))
        if level <= human - DISAGREEMENT_LEVELS:
            strict.append((human - level, item))
        elif level >= human + DISAGREEMENT_LEVELS:
            lenient.append((level - human, item))

    def worst(found: list[tuple[float, Disagreement]]) -> tuple[Disagreement, ...]:
        return tuple(d for _, d in sorted(found, key=lambda g: (-g[0], g[1].event_id))[:top])

    return worst(strict), worst(lenient)


def human_agreement(labels: Sequence[StoredLabel], boot: Bootstrap) -> HumanAgreement:
    """κ between the first two reviewers (by name) of each item two different reviewers labelled."""
    by: dict[str, list[StoredLabel]] = {}
    for lab in labels:
        by.setdefault(lab.event_id, []).append(lab)
    firsts, seconds = [], []
    for event_id in sorted(by):
        group = sorted(by[event_id], key=lambda lab: lab.reviewer)
        if len(group) >= 2:
            firsts.append(group[0].label)
            seconds.append(group[1].label)
    return HumanAgreement(weighted_kappa(firsts, seconds, boot=boot), len(firsts))
