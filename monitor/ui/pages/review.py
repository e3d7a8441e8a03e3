"""The review page: the next item of the queue shown blind (the question, the answer and the conversation before
it; no judge's score or verdict until it is labelled), and after a label the page that reveals the judge's score."""

from __future__ import annotations

from dataclasses import dataclass

from monitor.calibration.agreement import bucket
from monitor.review.label_rows import StoredLabel
from monitor.review.queue import QueueItem
from monitor.store.connection import ClickHouseStore
from monitor.ui.pages.answer import NOT_STORED, Turn, context_turns
from monitor.ui.queries import answer_rows

SCALE = (
    (0, "irrelevant"),
    (1, "mostly irrelevant"),
    (2, "partly relevant"),
    (3, "mostly relevant"),
    (4, "fully relevant"),
)  # the rubric's levels, as the judge's prompt names them


@dataclass(frozen=True, slots=True)
class ReviewItem:
    """What the reviewer sees of an item before labelling it: never a score."""

    item: QueueItem
    question: str
    response: str
    text_stored: bool
    context: tuple[Turn, ...]


@dataclass(frozen=True, slots=True)
class Revealed:
    """The label just written and the judge's score it is compared with."""

    label: StoredLabel
    level: int | None  # the judge's score on the rubric's 0..4 scale


def load_item(store: ClickHouseStore, item: QueueItem) -> ReviewItem:
    """The item's texts from its primary judge's row (no judge's output is read into the view)."""
    rows = answer_rows(store, item.event_id, item.judge_id) or answer_rows(store, item.event_id, None)
    if not rows:
        return ReviewItem(item, "", "", False, ())
    r = rows[0]
    stored = bool(r.question or r.response)
    return ReviewItem(
        item,
        r.question if stored else NOT_STORED,
        r.response if stored else NOT_STORED,
        stored,
        context_turns(r.context),
    )


def revealed(label: StoredLabel) -> Revealed:
    """The page after a label (pure): the judge's score as a rubric level too."""
    score = label.judge_score
    return Revealed(label, None if score is None else int(bucket(score)))
