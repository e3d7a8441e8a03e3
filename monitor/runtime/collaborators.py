"""What a pipeline coordinates, built from settings by `monitor.runtime.service.build_pipeline`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from consumers.deadletter import DeadLetterPublisher
from consumers.offsets import OffsetTracker, Ticket
from consumers.sampling import Sampler
from consumers.settings import KafkaSettings
from monitor.judges.context_window import ContextWindow
from monitor.judging.cost_control import CostControl
from monitor.judging.guarded_judge import GuardedJudge
from monitor.judging.settings import FlowSettings
from monitor.judging.shadow import RowsOwed
from monitor.judging.verdict_reuse import VerdictReuse
from monitor.privacy.spans import Redactor
from monitor.runtime.feedback_flow import FeedbackParts
from monitor.runtime.health import Health
from monitor.runtime.metrics import Metrics
from monitor.runtime.rows import TextPolicy
from monitor.runtime.scorer import Shadow
from monitor.runtime.sink import ClickHouseSink
from monitor.store.async_store import AsyncStore

if TYPE_CHECKING:  # publishing (protobuf, ~2 MB resident) loads only when it is on
    from monitor.publish.publisher import EvaluationPublisher


@dataclass(frozen=True, slots=True)
class Collaborators:
    """Everything a pipeline coordinates, built from settings by `build_pipeline`."""

    kafka: KafkaSettings
    flow: FlowSettings
    text_policy: TextPolicy
    redactor: Redactor | None  # None: MONITOR_REDACT=false, the judge and the store see the text as received
    window: ContextWindow  # what of the conversation the judges read (and the row keeps)
    store: AsyncStore
    consumer: AIOKafkaConsumer
    producer: AIOKafkaProducer
    guard: GuardedJudge
    sampler: Sampler
    cost: CostControl
    reuse: VerdictReuse
    sink: ClickHouseSink[Ticket]
    tracker: OffsetTracker
    metrics: Metrics
    health: Health
    dlq: DeadLetterPublisher
    shadow: Shadow | None = None  # None: MONITOR_SHADOW_JUDGE unset
    publisher: EvaluationPublisher | None = None  # None: MONITOR_PUBLISH_EVALUATIONS=off
    feedback: FeedbackParts | None = None  # None: MONITOR_FEEDBACK_TOPICS unset
    owed: RowsOwed = field(default_factory=RowsOwed)  # the sink's acknowledgement settles rows through the same one
