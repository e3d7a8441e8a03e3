"""Synthetic traffic with personal data woven in: unchanged output without it, valid planted values in the judged
text of the events that carry it, and events that still decode."""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from datetime import UTC, datetime

import pytest

from consumers.decode import decode_event
from monitor.devtools.traffic import generate_events, generate_labelled_events
from schemas.errors import DecodeError
from schemas.events import KafkaPosition
from tests.monitor.devtools.test_pii_samples import check_planted

NOW = datetime(2025, 3, 3, 12, 0, tzinfo=UTC)

# sha256 over the first 500 record values (each prefixed by its 4-byte length), captured from the implementation
# before pii_share existed: with pii_share=0 the stream must stay byte-identical.
BEFORE_PII = {
    (1, 0.02): "80218a6bbadffb6e3a9e8d1726b8c67b051d7a9e11fd02d3e567c7e6b1c55db9",
    (7, 0.02): "b3a45a9fc2be898c4f0110585dd45af64ffe295d1442ea59ed9ca181a5e7b359",
    (7, 0.0): "12cd2dacc0607eeb7b8ce42ac49e75621480935198bc0c421f49906a4c4ca8fb",
    (11, 0.03): "a11c26281b1caa94f7fbc0962be2c2daebe11e2236fcac8043f158207701f575",
}


def _digest(values: list[bytes]) -> str:
    h = hashlib.sha256()
    for v in values:
        h.update(len(v).to_bytes(4, "big"))
        h.update(v)
    return h.hexdigest()


def _decode(value: bytes, offset: int):
    return decode_event(
        value,
        position=KafkaPosition(topic="conversations", partition=0, offset=offset),
        record_timestamp_ms=None,
        now=NOW,
    )


@pytest.mark.parametrize(("seed", "malformed_share"), sorted(BEFORE_PII))
def test_without_pii_the_stream_is_byte_identical_to_before(seed: int, malformed_share: float) -> None:
    """pii_share=0 (the default, or given explicitly) yields exactly the bytes the generator yielded before it
    existed."""
    default = list(generate_events(500, seed=seed, malformed_share=malformed_share, now=NOW))
    explicit = list(generate_events(500, seed=seed, malformed_share=malformed_share, now=NOW, pii_share=0.0))
    assert _digest(default) == BEFORE_PII[(seed, malformed_share)]
    assert explicit == default


def test_generate_events_is_the_labelled_stream_without_labels() -> None:
    """generate_events yields the record values of generate_labelled_events, for any pii_share."""
    for share in (0.0, 0.4, 1.0):
        labelled = list(generate_labelled_events(300, seed=3, now=NOW, pii_share=share))
        assert [v for v, _ in labelled] == list(generate_events(300, seed=3, now=NOW, pii_share=share))
        if share == 0.0:
            assert all(planted == () for _, planted in labelled)


def test_every_valid_event_carries_valid_planted_data_in_its_judged_text() -> None:
    """With pii_share=1 each valid event decodes, and one or two valid planted values sit in its question or
    response."""
    kinds: Counter[str] = Counter()
    valid = 0
    for offset, (value, planted) in enumerate(
        generate_labelled_events(1500, seed=5, malformed_share=0.05, now=NOW, pii_share=1.0)
    ):
        try:
            event = _decode(value, offset)
        except DecodeError:
            assert planted == ()  # the malformed records carry nothing
            continue
        valid += 1
        assert 1 <= len(planted) <= 2
        judged = event.question + "\n" + event.response
        for p in planted:
            assert p.value in event.question or p.value in event.response, (p, judged)
            check_planted(p, judged)
            kinds[p.kind] += 1
            # Nowhere but the text: not in ids, the segment fields or the metadata.
            elsewhere = json.dumps(
                [
                    event.event_id,
                    event.conversation_id,
                    event.app,
                    event.model,
                    event.prompt_version,
                    dict(event.metadata),
                ]
            )
            assert p.value not in elsewhere
    assert valid > 1300
    assert len(kinds) == 9 and min(kinds.values()) >= 50, kinds


def test_pii_lands_in_questions_and_responses_and_in_both_shapes() -> None:
    """Planted values appear in user messages, in responses, and in flat and chat events alike."""
    places: Counter[str] = Counter()
    for offset, (value, planted) in enumerate(generate_labelled_events(600, seed=9, now=NOW, pii_share=1.0)):
        if not planted:
            continue
        event = _decode(value, offset)
        for p in planted:
            places[event.shape] += 1
            places["question"] += p.value in event.question
            places["response"] += p.value in event.response
    assert min(places[k] for k in ("flat", "chat", "question", "response")) >= 100, places


def test_pii_share_is_the_share_of_valid_events_that_carry_pii() -> None:
    """pii_share=0.3 puts personal data into about 30% of the valid events and none into the rest."""
    labelled = list(generate_labelled_events(3000, seed=13, malformed_share=0.0, now=NOW, pii_share=0.3))
    share = sum(1 for _, planted in labelled if planted) / len(labelled)
    assert 0.26 < share < 0.34


def test_weaving_pii_only_adds_text_to_the_same_events() -> None:
    """The stream with PII is the stream without it, with the same ids, segments and labels, plus the planted text."""
    plain = [_decode(v, i) for i, v in enumerate(generate_events(400, seed=21, malformed_share=0.0, now=NOW))]
    woven = [
        _decode(v, i) for i, v in enumerate(generate_events(400, seed=21, malformed_share=0.0, now=NOW, pii_share=1.0))
    ]
    for a, b in zip(plain, woven, strict=True):
        assert (a.event_id, a.conversation_id, a.app, a.model, a.prompt_version, a.shape, a.metadata) == (
            b.event_id,
            b.conversation_id,
            b.app,
            b.model,
            b.prompt_version,
            b.shape,
            b.metadata,
        )
        assert a.question in b.question and b.response.startswith(a.response)
        assert (a.question, a.response) != (b.question, b.response)


def test_the_pii_stream_is_deterministic_for_a_seed() -> None:
    """The same seed and pii_share give the same bytes; another seed gives other planted data."""
    first = list(generate_labelled_events(200, seed=4, now=NOW, pii_share=0.5))
    assert first == list(generate_labelled_events(200, seed=4, now=NOW, pii_share=0.5))
    other = list(generate_labelled_events(200, seed=5, now=NOW, pii_share=0.5))
    mine, theirs = [p.value for _, ps in first for p in ps], [p.value for _, ps in other for p in ps]
    # The values come from a packaged pool (60 per kind): two streams share some, but not their order or most of them.
    assert mine != theirs and len(set(mine) & set(theirs)) < len(set(mine)) / 2
