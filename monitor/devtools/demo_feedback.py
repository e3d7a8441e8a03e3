"""Users' feedback in the demo: how much of it the traffic carries, and the closing lines it ends with (the
regressed app's thumbs-down share by prompt version, from the rollup, and how well the judge's score predicts a
thumbs-down). Kept apart from the rest of the demo so that these figures and their wording are easy to adjust."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from monitor.devtools.feedback_traffic import FeedbackMix
from monitor.feedback.agreement_queries import JudgeUserAgreement, judge_user_agreement
from monitor.store.connection import ClickHouseStore
from schemas.feedback import FEEDBACK_ROLLUP_TABLE

# A share of the answers get a thumbs or a rating. Live, within seconds (the demo lasts a minute or two); in the
# history, within minutes, as users do.
LIVE_MIX = FeedbackMix(0.3, delay_s=(2.0, 20.0))
HISTORY_MIX = FeedbackMix(0.3)
# With OTLP live traffic the feedback (our JSON) has a topic of its own beside the spans' topic.
OTLP_FEEDBACK_TOPIC = "feedback"


@dataclass(frozen=True, slots=True)
class VersionFeedback:
    """One prompt version's thumbs, summed over the rollup."""

    prompt_version: str
    n_thumbs: int
    n_thumbs_down: int

    @property
    def thumbs_down_share(self) -> float | None:
        """Thumbs down among its thumbs (None without any)."""
        return self.n_thumbs_down / self.n_thumbs if self.n_thumbs else None


@dataclass(frozen=True, slots=True)
class FeedbackFigures:
    """What the demo's closing lines on feedback say: the app's feedback by prompt version, and each judge's
    agreement with users over every segment and the whole run."""

    app: str
    versions: list[VersionFeedback]
    agreement: list[JudgeUserAgreement]


_BY_VERSION_SQL = """
SELECT prompt_version, sum(n_thumbs), sum(n_thumbs_down)
FROM {rollup} WHERE app = {app:String} GROUP BY prompt_version ORDER BY prompt_version
"""


def read_feedback_figures(store: ClickHouseStore, app: str, start: datetime, end: datetime) -> FeedbackFigures:
    """The figures of `app` (by prompt version, from `feedback_rollup_1m`) and the judges' agreement with users on
    the feedback given in [start, end). Raises `StoreError`."""
    rollup = f"{store.database}.{FEEDBACK_ROLLUP_TABLE}"
    rows = store.query(_BY_VERSION_SQL.replace("{rollup}", rollup), {"app": app}).rows
    versions = [VersionFeedback(str(v), int(t), int(d)) for v, t, d in rows]
    agreement = [a for a in judge_user_agreement(store, start, end) if a.all_segments and a.week is None]
    return FeedbackFigures(app, versions, agreement)


def feedback_lines(figures: FeedbackFigures) -> list[str]:
    """The closing lines: `Users' thumbs-down on support-bot: v12 14.8% (n=312), v13 36.1% (n=61)` and, per judge,
    `Judge against users: AUC 0.81 (0.76-0.86) for predicting a thumbs-down, 220 disliked and 1100 liked answers`."""
    shares = [
        f"{v.prompt_version} {share:.1%} (n={v.n_thumbs})"
        for v in figures.versions
        if (share := v.thumbs_down_share) is not None
    ]
    if not shares:
        return [f"Users' feedback on {figures.app}: none stored."]
    lines = [f"Users' thumbs-down on {figures.app}: {', '.join(shares)}"]
    for a in figures.agreement:
        auc = a.auc
        if auc.auc is None or auc.low is None or auc.high is None:
            lines.append(f"Judge against users ({a.judge_id}): no AUC yet ({auc.disliked} disliked, {auc.liked} liked)")
            continue
        rho = a.spearman
        ranks = f"; Spearman's rho {rho.rho:.2f} against {rho.n} ratings" if rho.rho is not None else ""
        lines.append(
            f"Judge against users ({a.judge_id}): AUC {auc.auc:.2f} ({auc.low:.2f}-{auc.high:.2f}) for predicting a "
            f"thumbs-down, on {auc.disliked} disliked and {auc.liked} liked answers{ranks}"
        )
    return lines
