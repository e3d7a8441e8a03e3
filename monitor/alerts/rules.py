"""Alert rules: pydantic models and YAML loading with one-line errors naming the bad field."""

from __future__ import annotations

import re
from collections.abc import Collection
from datetime import timedelta
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator, model_validator

from monitor.alerts.metric_specs import SPECS, Direction, MetricName, MetricSpec
from schemas.config_files import config_text, yaml_document
from schemas.durations import Duration
from schemas.errors import RulesError

DEFAULT_RULES_FILE = "default_rules.yaml"

SegmentField = Literal["app", "model", "prompt_version"]
# Which of a conversation's judged turns a rule reads: every one, the opening question (turn 0, which is also every
# flat event: it carries no history) or the follow-ups (turn 1 on, which the judge reads with their earlier turns).
Turns = Literal["all", "first", "follow_up"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class Bound(_Strict):
    """A fire level and a clear level (hysteresis): fire beyond `fire`, clear only back past `clear`."""

    fire: float
    clear: float | None = None

    @model_validator(mode="before")
    @classmethod
    def _bare_number(cls, value: Any) -> Any:
        if isinstance(value, int | float) and not isinstance(value, bool):
            return {"fire": value}
        return value

    @property
    def clear_level(self) -> float:
        """The clear level (the fire level when none is given)."""
        return self.fire if self.clear is None else self.clear


class Condition(_Strict):
    """When a value is bad: beyond an absolute threshold, and/or changed against the baseline in the bad
    direction by `change` (absolute) or `relative_change` (share of the baseline)."""

    threshold: Bound | None = None
    change: Bound | None = None
    relative_change: Bound | None = None
    combine: Literal["any", "all"] = "any"

    @model_validator(mode="after")
    def _checks(self) -> Condition:
        for name in ("change", "relative_change"):
            b: Bound | None = getattr(self, name)
            if b is not None and b.fire <= 0:
                raise ValueError(f"{name}.fire must be > 0 (the size of a change in the bad direction)")
            if b is not None and b.clear is not None and not 0 <= b.clear <= b.fire:
                raise ValueError(f"{name}.clear must be between 0 and fire ({b.fire})")
        return self

    @property
    def uses_baseline(self) -> bool:
        """True when a criterion compares against the baseline."""
        return self.change is not None or self.relative_change is not None

    @property
    def empty(self) -> bool:
        """True when no criterion is set."""
        return self.threshold is None and not self.uses_baseline


class Baseline(_Strict):
    """What a window is compared with: the trailing period right before it, or the same hours on the previous days."""

    trailing: Duration | None = None
    previous_days: int | None = Field(None, ge=1, le=28)

    @model_validator(mode="after")
    def _one(self) -> Baseline:
        if (self.trailing is None) == (self.previous_days is None):
            raise ValueError("give exactly one of trailing (a duration) or previous_days (a number of days)")
        if self.trailing is not None and self.trailing.total_seconds() <= 0:
            raise ValueError("trailing must be a positive duration")
        return self


class Rollout(_Strict):
    """What a rollout rule compares: per segment, the newest value of `of` (the one whose first event is latest)
    against the one before it, both over the rule's window."""

    of: Literal["prompt_version", "model"]
    lookback: Duration = Field(timedelta(days=7), description="how far back a version's first event is looked for")
    # Versions that start within this of each other started together (an A/B split, traffic after a quiet night):
    # neither is a rollout of the other.
    min_gap: Duration = Field(
        timedelta(hours=1), description="the newest must have started this long after the one before it"
    )


class Detector(_Strict):
    """A sequential level detector (CUSUM) in place of a fixed-window test: tuned to a shift of `shift` in the bad
    direction (on the 0..1 score, or the low-score share), its threshold calibrated from each segment's baseline to
    its share of the rules file's false-alarm budget (`monitor.alerts.sequential`)."""

    shift: float = Field(
        gt=0.0, le=1.0, description="the smallest change worth paging on, which the detector is tuned to"
    )  # on the 0..1 score, the low-score share or the negative feedback share
    # The baseline ends this long before now, inside the window: the newest events are watched, not learnt from,
    # while a history shorter than the window still calibrates (an episode's reference is frozen anyway).
    fresh: Duration = Field(timedelta(hours=1), description="the newest stretch the baseline leaves out")


DETECTOR_METRICS = ("mean_score", "low_score_share", "feedback_negative_share")
DEFAULT_ALPHA = 0.001


class Rule(_Strict):
    """One alert rule, evaluated per segment."""

    name: str = Field(pattern=r"^[A-Za-z0-9_.:-]{1,100}$")
    description: str = ""
    metric: MetricName
    low_score_below: float = Field(0.5, gt=0.0, le=1.0, description="low_score_share counts scores below this")
    segment_by: list[SegmentField] = Field(default_factory=list)
    source: Literal["scores", "traffic"] = Field("scores", description="no_data: judged rows, or consumed traffic")
    window: Duration = timedelta(minutes=30)
    offset: Duration = Field(timedelta(0), description="the window ends this long before now (rows still being scored)")
    baseline: Baseline | None = None
    rollout: Rollout | None = Field(None, description="rollout_mean_score: which field's newest value to compare")
    direction: Direction | None = None
    condition: Condition = Field(default_factory=Condition)
    min_events: int = Field(30, ge=0, description="judged events (or sampled, for coverage) needed in the window")
    min_baseline_events: int = Field(100, ge=0, description="events needed in the baseline when it is used")
    test: Literal["auto", "none"] = "auto"
    detector: Detector | None = Field(
        None, description="a sequential detector instead of the window's test (mean_score, low_score_share)"
    )
    # Omitted, the level is derived each round from the rule's share of its severity's budget
    # (`monitor.alerts.budget`); given, it overrides that, and what it implies is counted against the budget. The
    # default is only the level of a rule decided on its own, outside any round.
    alpha: float = Field(
        DEFAULT_ALPHA,
        gt=0.0,
        lt=1.0,
        description="significance level of the one-sided test (per rollout for rollout rules); omitted: derived",
    )
    budget_share: float = Field(
        1.0, gt=0.0, description="the rule's weight in its severity's false_alarms_per_week (rules with a test)"
    )
    for_: Duration = Field(timedelta(0), alias="for")
    repeat_interval: Duration = Field(timedelta(hours=4), description="re-notify webhooks this often while firing")
    severity: str = Field("warning", pattern=r"^[A-Za-z0-9_-]{1,40}$")
    labels: dict[str, str] = Field(default_factory=dict)
    # Rows of `relevancy-monitor replay` (replay_run != '') are history scored later: left out by default, so a
    # backfill cannot move a live baseline; a team backfilling with the live judge includes them.
    include_replays: bool = Field(
        False, description="read the rows `relevancy-monitor replay` wrote as well as the live ones"
    )
    # A regression that only shows on follow-ups (a prompt change that loses the thread) is diluted by the first
    # turns in a rule that reads them all; a rule of its own on the follow-ups sees it at full strength.
    turns: Turns = Field("all", description="the judged turns read: all, first (turn 0) or follow_up (turn 1 on)")
    # One page for one incident: a rule that reads a part of another's traffic (the follow-ups of its segments) would
    # fire beside it on a regression of every turn (`monitor.alerts.inhibition`).
    quiet_while: list[str] = Field(
        default_factory=list,
        description="rules whose firing on the same segment holds this rule's new episode pending",
    )

    @field_validator("segment_by")
    @classmethod
    def _unique_segments(cls, value: list[str]) -> list[str]:
        if len(set(value)) != len(value):
            raise ValueError("segment_by lists a field twice")
        return value

    @field_validator("labels")
    @classmethod
    def _label_names(cls, value: dict[str, str]) -> dict[str, str]:
        for k in value:
            if not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", k):
                raise ValueError(f"label name {k!r} is not [A-Za-z_][A-Za-z0-9_]*")
        return value

    @model_validator(mode="after")
    def _checks(self) -> Rule:
        if self.window.total_seconds() < 60:
            raise ValueError("window must be at least 1m")
        if self.spec.table == "canary" and self.segment_by:
            raise ValueError(
                f"a {self.metric} rule is per judge and labelled set: segment_by must be [] (canary runs have no app, "
                "model or prompt_version)"
            )
        if self.spec.silence:
            if self.baseline is None:
                raise ValueError(f"a {self.metric} rule needs a baseline (where the segment had traffic before)")
            if not self.condition.empty:
                raise ValueError(
                    f"a {self.metric} rule takes no condition: it fires when a segment with traffic goes silent"
                )
        elif self.detector is not None:
            self._check_detector()
        else:
            if self.source != "scores":
                raise ValueError("source applies to no_data rules only")
            if self.condition.empty:
                raise ValueError("condition needs threshold, change or relative_change")
            if self.condition.uses_baseline and self.baseline is None and not self.spec.compares_versions:
                raise ValueError("condition compares with a baseline (change/relative_change): give baseline")
        if self.include_replays and (self.spec.table in ("canary", "feedback") or self.source == "traffic"):
            what = {"canary": "canary runs", "feedback": "the feedback rollup"}.get(
                self.spec.table, "the traffic counts"
            )
            raise ValueError(
                f"include_replays applies to rules over the scores table only ({what} hold no replayed rows)"
            )
        if self.spec.table in ("labels", "feedback_scores"):
            self._check_labels()
        if self.name in self.quiet_while:
            raise ValueError("quiet_while names the rule itself")
        if self.turns != "all" and (
            self.spec.table in ("canary", "feedback") or self.source == "traffic" or self.spec.needs_traffic
        ):
            what = {"canary": "canary runs", "feedback": "the feedback rollup"}.get(
                self.spec.table, "the traffic counts"
            )
            raise ValueError(f"turns applies to rules over the scores table only ({what} have no turns)")
        self._check_rollout()
        t = self.condition.threshold
        if t is not None and t.clear is not None:
            if self.bad_direction == "down" and t.clear < t.fire:
                raise ValueError(f"condition.threshold.clear must be >= fire for {self.metric} (lower is worse)")
            if self.bad_direction == "up" and t.clear > t.fire:
                raise ValueError(f"condition.threshold.clear must be <= fire for {self.metric} (higher is worse)")
        return self

    def _check_detector(self) -> None:
        assert self.detector is not None
        if self.metric not in DETECTOR_METRICS:
            raise ValueError(
                f"detector applies to {', '.join(DETECTOR_METRICS[:-1])} and {DETECTOR_METRICS[-1]} rules only"
            )
        if self.baseline is None or self.baseline.trailing is None:
            raise ValueError(
                "a detector rule needs baseline: {trailing: ...}: the history its threshold is calibrated on"
            )
        if not self.condition.empty:
            raise ValueError(
                "a detector rule takes no condition: detector.shift and the false-alarm budget set when it fires"
            )
        if self.for_ > timedelta(0):
            # Pending would not mean the drop persisted: the statistic keeps its evidence, so a brief drop would
            # fire `for` later all the same.
            raise ValueError("a detector rule takes no for: its threshold is the evidence, and the statistic keeps it")
        if not timedelta(0) < self.detector.fresh <= self.window:
            raise ValueError("detector.fresh must be positive and at most the window")

    def _check_labels(self) -> None:
        # Agreement with people moves with labels (or feedback), not with traffic: a floor over a window, per judge.
        what = "labels" if self.spec.table == "labels" else "users' feedback"
        if self.baseline is not None or self.condition.uses_baseline:
            raise ValueError(
                f"a {self.metric} rule compares with a floor: condition.threshold only, no baseline ({what} come too "
                "slowly for a history of their own)"
            )
        if self.turns != "all":
            raise ValueError(f"turns applies to rules over the scores table only (a {self.metric} rule reads {what})")

    def _check_rollout(self) -> None:
        if not self.spec.compares_versions:
            if self.rollout is not None:
                raise ValueError("rollout applies to rollout_mean_score rules only")
            return
        if self.rollout is None:
            raise ValueError(f"a {self.metric} rule needs rollout: {{of: prompt_version}} or {{of: model}}")
        if self.baseline is not None:
            raise ValueError(
                f"a {self.metric} rule takes no baseline: it compares with the version before the newest, in the same "
                "window"
            )
        if self.rollout.of in self.segment_by:
            raise ValueError(f"segment_by must not list {self.rollout.of}: the rule compares its values")
        if self.rollout.lookback < self.window:
            raise ValueError("rollout.lookback must be at least the window")

    @property
    def spec(self) -> MetricSpec:
        """The specification of the rule's metric."""
        return SPECS[self.metric]

    @property
    def bad_direction(self) -> Direction:
        """Which way of the value is bad."""
        return self.direction or self.spec.bad_direction

    @property
    def key_fields(self) -> tuple[str, ...]:
        """The segment key columns in a fixed order; judge_id for score metrics (and the labelled set for canary
        metrics); a rollout rule's field too (the segment is the newest version)."""
        keyed = {*self.segment_by, *((self.rollout.of,) if self.rollout is not None else ())}
        fields = tuple(f for f in ("app", "model", "prompt_version") if f in keyed)
        return (*fields, "judge_id", *self.spec.extra_keys) if self.spec.judge_keyed else fields

    @property
    def uses_baseline(self) -> bool:
        """True when the baseline window is queried."""
        return self.spec.silence or self.condition.uses_baseline or self.detector is not None

    @property
    def explicit_alpha(self) -> float | None:
        """The rules file's `alpha:`, or None when it is derived from the rule's share of the budget."""
        return self.alpha if "alpha" in self.model_fields_set else None

    @property
    def spends_budget(self) -> bool:
        """True when chance can make the rule fire: a detector, or a significance test (`test: auto` on a metric
        that has one). A rule without either fires on the size of the change alone and spends no false alarms."""
        return self.detector is not None or (self.test == "auto" and bool(self.spec.tests))


DEFAULT_BUDGET = {"page": 1.0, "ticket": 3.0}


class RuleSet(_Strict):
    """The rules of one file, and the false alarms a week they may give, per severity, over the whole deployment:
    shared by the rules that can fire by chance (`Rule.spends_budget`) in proportion to their `budget_share`."""

    rules: list[Rule] = Field(min_length=1)
    false_alarms_per_week: dict[str, float] = Field(default_factory=lambda: dict(DEFAULT_BUDGET))
    # Set by `chosen`: each severity's total budget_share in the file the rules were chosen from.
    _weights: dict[str, float] | None = PrivateAttr(None)

    @field_validator("false_alarms_per_week")
    @classmethod
    def _positive(cls, value: dict[str, float]) -> dict[str, float]:
        for severity, n in value.items():
            if not n > 0:
                raise ValueError(f"false_alarms_per_week.{severity} must be > 0")
        return value

    def severity_budget(self, severity: str) -> float:
        """The false alarms a week a severity may give (1 for a severity the file does not list)."""
        return self.false_alarms_per_week.get(severity, 1.0)

    def budget(self, rule: Rule) -> float:
        """The false alarms a week `rule`'s segments may give together: its severity's budget split over that
        severity's rules that spend it, in proportion to their `budget_share` (0 for a rule that spends none)."""
        if not rule.spends_budget:
            return 0.0
        if self._weights is not None and rule.severity in self._weights:
            total = self._weights[rule.severity]
        else:
            total = rule.budget_share + sum(
                r.budget_share
                for r in self.rules
                if r.spends_budget and r.severity == rule.severity and r.name != rule.name
            )
        return self.severity_budget(rule.severity) * rule.budget_share / total

    def chosen(self, names: Collection[str]) -> RuleSet:
        """The rules named, each keeping the share of the budget it has among all of this file's rules: a backtest
        of one rule decides at the levels the whole file gives it."""
        subset = self.model_copy(update={"rules": [r for r in self.rules if r.name in names]})
        weights: dict[str, float] = {}
        for r in self.rules:
            if r.spends_budget:
                weights[r.severity] = weights.get(r.severity, 0.0) + r.budget_share
        subset._weights = self._weights if self._weights is not None else weights
        return subset

    @model_validator(mode="after")
    def _unique(self) -> RuleSet:
        seen: set[str] = set()
        for r in self.rules:
            if r.name in seen:
                raise ValueError(f"two rules are named {r.name!r}")
            seen.add(r.name)
        return self


def _describe(err: ValidationError, data: Any) -> str:
    first = err.errors(include_url=False)[0]
    loc = list(first["loc"])
    parts: list[str] = []
    for i, item in enumerate(loc):
        if isinstance(item, int):
            parts[-1] = f"{parts[-1]}[{item}]"
            if i == 1 and loc[0] == "rules" and isinstance(data, dict):
                try:
                    name = data["rules"][item].get("name")
                except (AttributeError, IndexError, KeyError, TypeError):
                    name = None
                if name:
                    parts[-1] += f" ({name})"
        else:
            parts.append(str(item).rstrip("_"))
    where = ".".join(parts) or "rules file"
    msg = first["msg"].removeprefix("Value error, ")
    given = first.get("input")
    shown = (
        f" (got {given!r})"
        if isinstance(given, str | int | float) and not isinstance(given, bool) and len(str(given)) < 60
        else ""
    )
    return f"{where}: {msg}{shown}"


def parse_rules(text: str, source: str = "rules") -> RuleSet:
    """Rules from YAML text; raises `RulesError` naming the file and the bad field."""
    data = yaml_document(text, source, RulesError)
    if isinstance(data, list):
        data = {"rules": data}
    if not isinstance(data, dict):
        raise RulesError(f"{source}: expected a mapping with a `rules:` list")
    try:
        rules = RuleSet.model_validate(data)
    except ValidationError as e:
        raise RulesError(f"{source}: {_describe(e, data)}") from None
    names = {r.name for r in rules.rules}
    for i, r in enumerate(rules.rules):
        unknown = [n for n in r.quiet_while if n not in names]
        if unknown:
            raise RulesError(f"{source}: rules[{i}] ({r.name}).quiet_while: no rule named {unknown[0]!r} in the file")
    return rules


def load_rules(path: str | Path | None = None) -> RuleSet:
    """Rules from a YAML file, or the shipped defaults when `path` is None."""
    return parse_rules(*config_text(path, "monitor.alerts", DEFAULT_RULES_FILE, "rules", RulesError))
