"""Deterministic sampling: which events are judged, at what effective rate, by which rule.

The decision is `hash(key) < effective_rate`, with the hash of `conversation_id` (default) or `event_id`: the same
key gets the same decision in every process and on every replay at the same rate, and a lower rate samples a
subset of a higher one. The effective rate is the first matching rule's rate (or the base rate), raised to 1
while a segment has fewer than its minimum judged events in the current window, then multiplied by an outside
factor (budget and freshness, decided in `monitor`).

The shadow sample (`ShadowSampler`) is a second, independent draw over the same key with its own salt, among the
events the primary judges: the same events are shadowed on every replica and replay, and a shadow row's rate is the
primary's effective rate times the shadow rate, so 1/sample_rate still weights it to traffic."""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Literal, Protocol

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from consumers.group_share import GroupShare, per_window
from consumers.settings import SampleKey, SamplingSettings
from schemas.errors import SamplingConfigError

SegmentField = Literal["app", "model", "prompt_version"]
SEGMENT_FIELDS: tuple[SegmentField, ...] = ("app", "model", "prompt_version")


class Sampleable(Protocol):
    """What a decision reads of an event: a `ConversationEvent`, or the pipeline's `DecodedEvent` before one is
    built."""

    @property
    def event_id(self) -> str:
        """The event's id (a sampling key)."""

    @property
    def conversation_id(self) -> str:
        """The conversation's id (the default sampling key)."""

    @property
    def app(self) -> str:
        """The app (rules match it, and segments count it)."""

    @property
    def model(self) -> str:
        """The model (rules match it, and segments count it)."""

    @property
    def prompt_version(self) -> str:
        """The prompt version (rules match it, and segments count it)."""

    @property
    def metadata(self) -> Mapping[str, str]:
        """The labels rules match."""


_BLAKE2B_8 = hashlib.blake2b(digest_size=8)  # copied per key: cheaper than building one from its parameters


def sample_point(key: str) -> float:
    """A stable pseudo-random number in [0, 1) for `key` (BLAKE2b, independent of PYTHONHASHSEED)."""
    h = _BLAKE2B_8.copy()
    h.update(key.encode("utf-8"))
    return int.from_bytes(h.digest(), "big") / 2**64


_MAX_DECISIONS = 1024
SHADOW_SALT = (
    b"rm-shadow-v1"  # BLAKE2b's own salt parameter (at most 16 bytes); changing it reshuffles the shadow sample
)


def shadow_point(key: str) -> float:
    """Like `sample_point`, salted: independent of the primary's draw, so the shadowed events are a random
    subset of the judged ones rather than the judged ones with the lowest primary points."""
    digest = hashlib.blake2b(key.encode("utf-8"), digest_size=8, salt=SHADOW_SALT).digest()
    return int.from_bytes(digest, "big") / 2**64


class Match(BaseModel):
    """What a rule matches: each given field must equal one of the listed values (all must hold)."""

    model_config = ConfigDict(extra="forbid")

    app: list[str] | None = None
    model: list[str] | None = None
    prompt_version: list[str] | None = None
    metadata: dict[str, list[str]] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _scalars_to_lists(cls, data: object) -> object:
        # `app: support-bot` is shorthand for `app: [support-bot]`
        if isinstance(data, dict):
            out = {k: ([v] if isinstance(v, str) else v) for k, v in data.items() if k != "metadata"}
            meta = data.get("metadata") or {}
            if isinstance(meta, dict):
                out["metadata"] = {k: ([v] if isinstance(v, str) else v) for k, v in meta.items()}
            else:
                out["metadata"] = meta
            return out
        return data

    def matches(self, event: Sampleable) -> bool:
        """Whether every condition holds for `event`."""
        for name in ("app", "model", "prompt_version"):
            allowed = getattr(self, name)
            if allowed is not None and getattr(event, name) not in allowed:
                return False
        return all(event.metadata.get(k) in allowed for k, allowed in self.metadata.items())


class Rule(BaseModel):
    """One sampling rule: `rate`, or `always`, or `never`, for the events it matches."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1)
    match: Match = Field(default_factory=Match)
    rate: float | None = Field(default=None, ge=0.0, le=1.0)
    always: bool = False
    never: bool = False

    @model_validator(mode="after")
    def _one_action(self) -> Rule:
        if sum((self.rate is not None, self.always, self.never)) != 1:
            raise ValueError(f"rule {self.name!r} needs exactly one of rate, always: true, never: true")
        return self


class MinPerSegment(BaseModel):
    """Judge everything in a segment until this replica has judged `events_per_replica` of it in the current
    window, or, with `min_per_minute`, a judged rate: detection time is set by judged events a minute, not by a
    percentage. `min_per_minute` is the consumer group's figure: each replica judges its share of it (its partitions
    over all, `consumers.group_share`), so N replicas judge the minimum once. `events_per_replica` is counted per
    process, as its name says: N replicas judge up to N times it. The budget's factor still scales both."""

    model_config = ConfigDict(extra="forbid")

    events_per_replica: int | None = Field(None, ge=1)
    min_per_minute: float | None = Field(None, gt=0, le=10_000)
    window_s: float | None = Field(None, gt=0)
    segment_by: list[SegmentField] = Field(default_factory=lambda: list(SEGMENT_FIELDS))

    @model_validator(mode="after")
    def _one_minimum(self) -> MinPerSegment:
        if (self.events_per_replica is None) == (self.min_per_minute is None):
            raise ValueError("min_per_segment needs exactly one of events_per_replica or min_per_minute")
        if self.min_per_minute is not None and self.window_s is not None:
            raise ValueError(
                "min_per_segment.window_s goes with events_per_replica: min_per_minute picks its own window"
            )
        return self

    def window_seconds(self, share: float = 1.0) -> float:
        """The counting window: `window_s` (an hour by default), or a minute (longer for this replica's `share` of
        `min_per_minute` under one a minute)."""
        if self.min_per_minute is not None:
            rate = self.min_per_minute * share
            return max(60.0, 60.0 / rate) if rate > 0 else 60.0
        return self.window_s if self.window_s is not None else 3600.0

    def events_per_window(self, share: float = 1.0) -> int:
        """How many events of a segment this replica judges whatever the rate, in each window, with `share` of the
        group's `min_per_minute` (no share: none)."""
        if self.min_per_minute is not None:
            return per_window(self.min_per_minute * share, self.window_seconds(share)) if share > 0 else 0
        assert self.events_per_replica is not None
        return self.events_per_replica


class SamplingPolicy(BaseModel):
    """The whole sampling configuration (the YAML file's content)."""

    model_config = ConfigDict(extra="forbid")

    key: SampleKey = "conversation_id"
    default_rate: float = Field(1.0, ge=0.0, le=1.0)
    rules: list[Rule] = Field(default_factory=list)
    min_per_segment: MinPerSegment | None = None

    @model_validator(mode="before")
    @classmethod
    def _renamed_events(cls, data: object) -> object:
        if (
            isinstance(data, dict)
            and isinstance(data.get("min_per_segment"), dict)
            and "events" in data["min_per_segment"]
        ):
            raise ValueError("min_per_segment.events is now events_per_replica: the minimum is counted by each replica")
        return data

    @classmethod
    def from_yaml(cls, path: Path, default_rate: float, key: SampleKey) -> SamplingPolicy:
        """Load a policy file; `default_rate` and `key` apply where the file does not set them."""
        try:
            data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        except OSError as e:
            raise SamplingConfigError(f"cannot read sampling file {path}: {e.strerror}") from None
        except yaml.YAMLError as e:
            raise SamplingConfigError(f"sampling file {path} is not valid YAML: {str(e).splitlines()[0]}") from None
        if not isinstance(data, dict):
            raise SamplingConfigError(f"sampling file {path} must hold a mapping")
        data.setdefault("default_rate", default_rate)
        data.setdefault("key", key)
        try:
            return cls.model_validate(data)
        except ValidationError as e:
            err = e.errors(include_url=False)[0]
            where = ".".join(str(x) for x in err["loc"]) or "(file)"
            raise SamplingConfigError(
                f"sampling file {path}: {where}: {err['msg'].removeprefix('Value error, ')}"
            ) from None


class DecisionKind(StrEnum):
    """What chose a sampling decision (a metric label, and the head of the stored `sample_rule`)."""

    BASE = "base"
    RULE = "rule"
    ALWAYS = "always"
    NEVER = "never"
    STOPPED = "stopped"
    MIN_PER_SEGMENT = "min_per_segment"
    SHADOW = "shadow"
    # An answer users disliked that sampling skipped, judged from its record read back from Kafka (monitor.feedback):
    # never a sampling decision, and its rows are kept out of the relevancy detectors' streams.
    FEEDBACK = "feedback"


@dataclass(frozen=True, slots=True)
class SampleDecision:
    """Whether to judge an event, the effective rate (for 1/rate weights), what chose it (`kind`, the matching
    rule's name) and the outside factor that scaled the rate, with its reason (budget, freshness)."""

    sampled: bool
    rate: float
    kind: DecisionKind
    rule_name: str = ""
    factor: float = 1.0
    factor_reason: str = ""

    @property
    def rule(self) -> str:
        """The decision as stored in `sample_rule`: `base`, `rule:<name>`, `always:<name>`, `never:<name>`,
        `min_per_segment` or `stopped:<reason>`, followed by `*<factor>:<reason>` when a factor lowered the rate; a
        shadow row's is `shadow:` and the primary decision's (`shadow:base`, `shadow:rule:vip*0.5:budget`)."""
        reason = self.factor_reason or "factor"
        if self.kind is DecisionKind.STOPPED:
            return f"stopped:{reason}"
        head = f"{self.kind.value}:{self.rule_name}" if self.rule_name else self.kind.value
        return (
            f"{head}*{self.factor:.3g}:{reason}" if self.factor < 1.0 and self.kind is not DecisionKind.NEVER else head
        )


class Sampler:
    """Applies a `SamplingPolicy`; keeps per-segment judged counts for the minimum-per-segment rule."""

    def __init__(self, policy: SamplingPolicy) -> None:
        self.policy = policy
        self._share = 1.0  # of the group's min_per_minute: set at each rebalance (`set_share`)
        self._min_events = policy.min_per_segment.events_per_window() if policy.min_per_segment else 0
        self._window_start: float | None = None
        self._judged: dict[tuple[str, ...], int] = defaultdict(int)
        self._decisions: dict[tuple[bool, float, DecisionKind, str, float, str], SampleDecision] = {}
        self._last = SampleDecision(
            False, -1.0, DecisionKind.BASE
        )  # the previous decision: runs of the same are common

    @classmethod
    def from_settings(cls, settings: SamplingSettings) -> Sampler:
        """The sampler: the rules file if set, else the base rate; raises `SamplingConfigError` on a bad file."""
        if settings.file is None:
            return cls.at_rate(settings.rate, settings.key)
        return cls(SamplingPolicy.from_yaml(settings.file, settings.rate, settings.key))

    @classmethod
    def at_rate(cls, rate: float, key: SampleKey = "conversation_id") -> Sampler:
        """A sampler with only a base rate."""
        if not 0.0 <= rate <= 1.0:
            raise ValueError(f"sample rate must be within [0, 1], got {rate}")
        return cls(SamplingPolicy(default_rate=rate, key=key))

    def set_share(self, share: GroupShare) -> None:
        """Judge this replica's share of the group's per-segment minimum from now on (a rebalance moved partitions)."""
        mps = self.policy.min_per_segment
        self._share = share.fraction
        if mps is not None:
            self._min_events = mps.events_per_window(self._share)
            self._window_start = None  # a new window: the counts of the old share no longer apply

    def _segment(self, event: Sampleable) -> tuple[str, ...]:
        assert self.policy.min_per_segment is not None
        return tuple(getattr(event, f) for f in self.policy.min_per_segment.segment_by)

    def _roll_window(self, now: float) -> None:
        mps = self.policy.min_per_segment
        if mps is None:
            return
        window = mps.window_seconds(self._share)
        if self._window_start is None or now - self._window_start >= window:
            self._window_start = now - (now % window)  # aligned windows: replicas agree on boundaries
            self._judged.clear()

    def decide(self, event: Sampleable, *, factor: float = 1.0, reason: str = "", now: float = 0.0) -> SampleDecision:
        """The decision for one event. `factor` in [0, 1] scales rate-based decisions for `reason` (budget,
        freshness); 0 stops all judging, `always` rules included."""
        policy = self.policy
        rule = None
        for r in policy.rules:
            if r.match.matches(event):
                rule = r
                break
        if rule is not None and rule.never:
            return self._decision(False, 0.0, DecisionKind.NEVER, rule.name, 1.0, "")
        if factor <= 0.0:
            return self._decision(False, 0.0, DecisionKind.STOPPED, "", 0.0, reason)
        if rule is not None and rule.always:
            return self._decision(True, 1.0, DecisionKind.ALWAYS, rule.name, 1.0, "")
        if rule is not None and rule.rate is not None:
            rate, kind, name = rule.rate, DecisionKind.RULE, rule.name
        else:
            rate, kind, name = policy.default_rate, DecisionKind.BASE, ""
        mps = policy.min_per_segment
        if mps is not None:
            self._roll_window(now)
            if self._judged[self._segment(event)] < self._min_events:
                rate, kind, name = 1.0, DecisionKind.MIN_PER_SEGMENT, ""
        factor = min(1.0, factor)
        effective = rate * factor
        # The key is hashed only where the point decides: at an effective rate of 0 (the rate, or a factor that
        # stops judging) no point is below it, and the hash was nearly half of what a decision cost.
        sampled = (
            effective > 0.0
            and sample_point(event.conversation_id if policy.key == "conversation_id" else event.event_id) < effective
        )
        if sampled and mps is not None:
            self._judged[self._segment(event)] += 1
        return self._decision(sampled, effective, kind, name, factor, reason)

    def _decision(
        self, sampled: bool, rate: float, kind: DecisionKind, name: str, factor: float, reason: str
    ) -> SampleDecision:
        """The `SampleDecision` of these values, one shared instance per distinct decision (it is frozen): most
        decisions repeat, and building a frozen dataclass costs more than the look-up."""
        last = self._last
        same = last.sampled is sampled and last.rate == rate and last.kind is kind and last.rule_name == name
        if same and last.factor == factor and last.factor_reason == reason:
            return last
        key = (sampled, rate, kind, name, factor, reason)
        found = self._decisions.get(key)
        if found is None:
            if len(self._decisions) >= _MAX_DECISIONS:  # a budget factor varies continuously: keep the cache small
                self._decisions.clear()
            found = self._decisions[key] = SampleDecision(sampled, rate, kind, name, factor, reason)
        self._last = found
        return found


class ShadowSampler:
    """Which of the events the primary judges the shadow judge judges too: `shadow_point(key) < rate`, over the
    primary's sampling key (a shadowed conversation is shadowed whole, like a sampled one)."""

    def __init__(self, rate: float, key: SampleKey = "conversation_id") -> None:
        if not 0.0 <= rate <= 1.0:
            raise ValueError(f"shadow sample rate must be within [0, 1], got {rate}")
        self.rate = rate
        self.key = key

    def decide(self, event: Sampleable, primary: SampleDecision) -> SampleDecision | None:
        """The shadow row's decision for an event the primary judges (`primary.sampled`), or None: not shadowed."""
        if not primary.sampled or self.rate <= 0.0:
            return None
        key = event.conversation_id if self.key == "conversation_id" else event.event_id
        if shadow_point(key) >= self.rate:
            return None
        return SampleDecision(True, primary.rate * self.rate, DecisionKind.SHADOW, primary.rule)
