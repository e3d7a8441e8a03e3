"""The judge-against-user figures in words, the same in `alerts check`, the report and the UI: `0.74 [0.66, 0.82]`
with its counts, or a dash and why a figure is undefined."""

from __future__ import annotations

from monitor.feedback.agreement import MIN_RANK_PAIRS, AucFigure, RankFigure
from monitor.feedback.agreement_queries import JudgeUserAgreement

AUC_MEANING = "AUC: how often an answer users liked scored above one they disliked (0.5: chance, 1: always)"
RHO_MEANING = "ρ: Spearman's rank correlation of the score with users' ratings"


def interval(value: float, low: float | None, high: float | None) -> str:
    """`0.74 [0.66, 0.82]`."""
    bounds = f" [{low:.2f}, {high:.2f}]" if low is not None and high is not None else ""
    return f"{value:.2f}{bounds}"


def auc_counts(f: AucFigure) -> str:
    """`n 12/48 disliked/liked`."""
    return f"n {f.disliked}/{f.liked} disliked/liked"


def auc_value(f: AucFigure) -> str:
    """The AUC and its interval, or `—` and why it is undefined."""
    if f.auc is None:
        return "— (no thumbs)" if f.disliked == f.liked == 0 else f"— (no {'liked' if f.liked == 0 else 'disliked'})"
    return interval(f.auc, f.low, f.high)


def rho_value(f: RankFigure) -> str:
    """ρ and its interval, or `—` and why it is undefined."""
    if f.rho is not None:
        return interval(f.rho, f.low, f.high)
    if f.n == 0:
        return "— (no ratings)"
    if f.n < MIN_RANK_PAIRS:
        return f"— (fewer than {MIN_RANK_PAIRS} ratings)"
    return "— (scores or ratings all equal)"


def auc_text(f: AucFigure) -> str:
    """`AUC 0.74 [0.66, 0.82] n 12/48 disliked/liked`."""
    return f"AUC {auc_value(f)} {auc_counts(f)}"


def rho_text(f: RankFigure) -> str:
    """`ρ 0.41 [0.22, 0.57] n 80`."""
    return f"ρ {rho_value(f)} n {f.n}"


def segment_name(a: JudgeUserAgreement) -> str:
    """`app=shop model=m1 prompt_version=v1`, or `all segments`."""
    if a.app is None:
        return "all segments"
    return f"app={a.app} model={a.model} prompt_version={a.prompt_version}"


def agreement_line(a: JudgeUserAgreement) -> str:
    """The two figures of one row: `AUC … · ρ …`."""
    return f"{auc_text(a.auc)} · {rho_text(a.spearman)}"
