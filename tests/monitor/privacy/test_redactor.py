"""The redactor: allow-list, the user's own patterns, counts, idempotence and robustness on arbitrary text."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from monitor.privacy.custom import compile_patterns
from monitor.privacy.events import redact_event
from monitor.privacy.redactor import RECOGNIZERS_VERSION, build_redactor
from monitor.privacy.settings import RedactionSettings
from monitor.privacy.spans import Span, replace_spans
from schemas.errors import ConfigError
from tests.monitor.privacy.events import event
from tests.properties import examples

REDACTOR = build_redactor(RedactionSettings())

# Characters the recognizers care about, so that generated text often looks like a number, an address or a key.
_PIECES = st.sampled_from(
    ["0", "1", "4", "5", "9", " ", "-", ".", ":", "/", "@", "+", "(", ")", "[", "]", "_", "=", "\n", "sk-", "ant",
    "api03",
     "AKIA", "eyJ", "Bearer ", "://", "x", "DE", "GB", "89", "example.com", "[CARD]", "[EMAIL]", "[PHONE]", "::",
     "ff", "é", "\x00"]
)  # fmt: skip
LOOKALIKE_TEXT = st.lists(_PIECES, max_size=60).map("".join)


def test_counts_are_per_kind_and_the_name_carries_the_version() -> None:
    """Counts say how many items of each kind were replaced; the default name is the recognizers' version."""
    result = REDACTOR.redact("a@b.io, c@d.io, 4539 1488 0343 6467")
    assert result.counts == {"EMAIL": 2, "CARD": 1} and result.total == 3
    assert REDACTOR.name == RECOGNIZERS_VERSION


def test_allowed_values_are_kept_case_insensitively() -> None:
    """A value on the allow-list survives, in any case; other items of its kind do not."""
    redactor = build_redactor(RedactionSettings(redact_allow=("support@example.com",)))
    result = redactor.redact("Write to Support@Example.com, not me@home.org")
    assert result.text == "Write to Support@Example.com, not [EMAIL]" and result.counts == {"EMAIL": 1}
    assert redactor.name != RECOGNIZERS_VERSION  # a different configuration is visible on the rows


def test_custom_patterns_get_their_own_placeholder_and_group() -> None:
    """A user pattern replaces its match (or its `item` group) with [KIND] and is counted under KIND."""
    redactor = build_redactor(
        RedactionSettings(redact_patterns={"ORDER_REF": r"ORD-\d{6}", "MEMBER": r"member (?P<item>M\d{5})"})
    )
    result = redactor.redact("ORD-123456 for member M12345")
    assert result.text == "[ORDER_REF] for member [MEMBER]" and result.counts == {"ORDER_REF": 1, "MEMBER": 1}


@pytest.mark.parametrize(
    ("patterns", "reason"),
    [
        ({"lower": "x"}, "upper case"),
        ({"BAD": "("}, "not a valid"),
        ({"EMPTY": "a*"}, "empty"),
        ({"BRACKET": r"\[\w+\]"}, "placeholder"),
    ],
)
def test_unusable_custom_patterns_are_refused(patterns: dict[str, str], reason: str) -> None:
    """A bad name, a broken expression, one matching empty text or one matching a placeholder is a ConfigError."""
    with pytest.raises(ConfigError, match=reason):
        compile_patterns(patterns)


def test_overlapping_spans_keep_the_first_given() -> None:
    """replace_spans keeps the first of two overlapping spans and ignores empty or out-of-range ones."""
    result = replace_spans("abcdef", [Span(1, 4, "A"), Span(2, 6, "B"), Span(5, 5, "C"), Span(4, 99, "D")])
    assert result.text == "a[A]ef" and result.counts == {"A": 1}


def test_an_event_is_redacted_in_question_response_and_metadata_values() -> None:
    """redact_event replaces items in the question, the response and metadata values, keeps ids, and sums the counts."""
    original = event(
        question="I am a@b.io", response="Card 4539 1488 0343 6467 noted", metadata={"email": "c@d.io", "tier": "gold"}
    )
    judged = redact_event(original, REDACTOR)
    assert (judged.judged.question, judged.judged.response) == ("I am [EMAIL]", "Card [CARD] noted")
    assert judged.judged.metadata == {"email": "[EMAIL]", "tier": "gold"}
    assert judged.redactions == {"EMAIL": 2, "CARD": 1} and judged.redactor == RECOGNIZERS_VERSION
    assert judged.original is original and judged.judged.event_id == original.event_id


def test_an_event_without_personal_data_is_passed_on_as_is() -> None:
    """Nothing found: the judged event is the original object and the counts are empty."""
    original = event(question="When did order A17 ship?", response="On 3 March.")
    judged = redact_event(original, REDACTOR)
    assert judged.judged is original and judged.redactions == {}


@settings(max_examples=examples(400), deadline=None)
@given(st.one_of(st.text(max_size=300), LOOKALIKE_TEXT))
def test_arbitrary_text_never_crashes_and_redacting_twice_changes_nothing(text: str) -> None:
    """Any str redacts without error, and redacting the result again changes nothing and counts nothing."""
    once = REDACTOR.redact(text)
    twice = REDACTOR.redact(once.text)
    assert twice.text == once.text and twice.counts == {}


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "unit", ["1 ", "1-", "a@", "a.", "0:", "sk-", "+1", "ab12", "x" * 50 + "@", "-----BEGIN PRIVATE KEY-----"]
)
def test_long_adversarial_text_finishes(unit: str) -> None:
    """A megabyte-scale run of one recognizer's candidate shape finishes (no catastrophic backtracking)."""
    text = unit * (200_000 // len(unit))
    assert len(REDACTOR.redact(text).text) > 0
