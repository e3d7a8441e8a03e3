"""The reviewers' labels as the labelled set `calibrate` reads: one JSON object per label (`monitor.calibration.labels`
parse_line's fields), with the question, answer, conversation and instructions stored with the labelled event.

`relevancy-monitor labels export` writes these lines to a file and `calibrate --labels store` parses the very same
lines, so both read the same pairs in the same order: one per label row, by (event_id, reviewer). The text is the
routing judge's row's (`labels.judge_id`), as the store kept it (redacted by default); a label whose answer has no
stored text (MONITOR_STORE_TEXT=none, or the text retention dropped it) stops the export in one line rather than
leave a shorter set that would look more certain than it is."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from monitor.review.label_rows import LABELS_TABLE, StoredLabel, read_labels
from monitor.store.connection import ClickHouseStore
from schemas.errors import UsageError

_TS = "DateTime64(3, 'UTC')"


@dataclass(frozen=True, slots=True)
class StoredText:
    """The text stored with one judged row: question, answer, the earlier turns (JSON, as stored) and the
    instructions."""

    question: str
    response: str
    context: str
    system: str


def label_record(label: StoredLabel, text: StoredText) -> dict[str, Any]:
    """One label as a labelled pair `calibrate` reads: id `event_id:reviewer`, the app as category, the route as tag,
    the reviewer's comment as rationale (pure)."""
    record: dict[str, Any] = {
        "id": f"{label.event_id}:{label.reviewer}",
        "question": text.question,
        "response": text.response,
        "label": label.label,
        "category": label.app,
        "tags": [label.route],
    }
    context = json.loads(text.context) if text.context.strip() else []
    if context:
        record["context"] = context
    if text.system:
        record["system"] = text.system
    if label.comment:
        record["rationale"] = label.comment
    return record


def export_lines(labels: Sequence[StoredLabel], texts: Mapping[tuple[str, str], StoredText]) -> list[str]:
    """The JSONL lines of `labels` (ordered by event_id, reviewer), their text from `texts` by (event_id, judge_id);
    raises `UsageError` (one line) when there is no label or some labelled answer has no stored text (pure)."""
    if not labels:
        raise UsageError("no labels in this range: label answers on the UI's review page first")
    ordered = sorted(labels, key=lambda lab: (lab.event_id, lab.reviewer))
    missing = [lab for lab in ordered if not (t := texts.get((lab.event_id, lab.judge_id))) or not t.question.strip()]
    if missing:
        raise UsageError(
            f"{len(missing)} of {len(ordered)} labelled answers have no stored text (first: event "
            f"{missing[0].event_id!r}): the store keeps none under MONITOR_STORE_TEXT=none, and the text retention "
            "(MONITOR_TEXT_RETENTION_DAYS) blanks old rows; nothing exported"
        )
    return [json.dumps(label_record(lab, texts[(lab.event_id, lab.judge_id)]), ensure_ascii=False) for lab in ordered]


def stored_texts(store: ClickHouseStore, since: datetime, until: datetime) -> dict[tuple[str, str], StoredText]:
    """{(event_id, judge_id): text} of every scored row of the events labelled in [since, until)."""
    sql = (
        "SELECT event_id, judge_id, argMax(question, scored_at), argMax(response, scored_at),\n"
        "       argMax(context, scored_at), argMax(system_instructions, scored_at)\n"
        f"FROM {store.qualified_table} FINAL\n"
        f"WHERE event_id IN (SELECT event_id FROM {store.database}.{LABELS_TABLE}\n"
        f"  WHERE labelled_at >= {{since:{_TS}}} AND labelled_at < {{until:{_TS}}})\n"
        "GROUP BY event_id, judge_id"
    )
    return {
        (str(e), str(j)): StoredText(str(q), str(r), str(c), str(s))
        for e, j, q, r, c, s in store.query(sql, {"since": since, "until": until}).rows
    }


def store_label_lines(store: ClickHouseStore, since: datetime, until: datetime) -> list[str]:
    """The export's lines of the labels written in [since, until), read from `store` (open for reads)."""
    return export_lines(read_labels(store, since, until), stored_texts(store, since, until))
