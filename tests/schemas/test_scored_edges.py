"""The scored row at the edges: statement arrays are capped with a truthful count, and every string the row
carries encodes as UTF-8, so the real store accepts it."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any
from unittest.mock import patch

from hypothesis import given, settings
from hypothesis import strategies as st

import schemas.scored as scored
from monitor.store.connection import ClickHouseStore
from schemas.scored import MAX_STORED_STATEMENTS, ScoredRow
from tests.properties import examples
from tests.schemas.test_scored import row

T0 = datetime(2026, 11, 29, 9, 0, tzinfo=UTC)


def test_statement_arrays_are_capped_and_the_count_stays_truthful(store: ClickHouseStore) -> None:
    """100,000 statements keep the first MAX_STORED_STATEMENTS in each array; n_statements still says 100,000."""
    n = 100_000
    r = row(
        statements=[f"word{i}." for i in range(n)],
        verdicts=["yes"] * n,
        verdict_reasons=["shares: word"] * n,
        n_statements=n,
    )
    assert len(r.statements) == len(r.verdicts) == len(r.verdict_reasons) == MAX_STORED_STATEMENTS
    assert r.statements[-1] == f"word{MAX_STORED_STATEMENTS - 1}." and r.n_statements == n
    store.insert_rows([r], "tok-cap")
    got = store.query(
        f"SELECT n_statements, length(statements), length(verdicts), length(verdict_reasons) FROM "
        f"{store.qualified_table}"
    ).rows
    assert got == [(n, MAX_STORED_STATEMENTS, MAX_STORED_STATEMENTS, MAX_STORED_STATEMENTS)]


def test_short_statement_arrays_are_kept_whole() -> None:
    """Arrays within the cap are stored as given (tuples from a Judgement become lists)."""
    r = row(statements=("a.", "b."), verdicts=("yes", "no"), verdict_reasons=("x", "y"), n_statements=2)
    assert (r.statements, r.verdicts, r.verdict_reasons) == (["a.", "b."], ["yes", "no"], ["x", "y"])


def test_lone_surrogates_anywhere_in_a_row_are_replaced_so_the_store_accepts_it(store: ClickHouseStore) -> None:
    """A lone surrogate in any string (judge output, metadata, text) becomes U+FFFD; before, the driver raised
    UnicodeEncodeError, which the sink retried forever."""
    r = row(
        reasoning="r\ud800",
        statements=["s\udfff"],
        verdicts=["yes"],
        verdict_reasons=["v\udc00"],
        n_statements=1,
        metadata={"k\ud800": "v\ud800"},
        question="q\ud800",
        response="a\ud800",
    )
    assert (r.reasoning, r.statements, r.verdict_reasons, r.question, r.response) == (
        "r\ufffd",
        ["s\ufffd"],
        ["v\ufffd"],
        "q\ufffd",
        "a\ufffd",
    )
    assert r.metadata == {"k\ufffd": "v\ufffd"}
    store.insert_rows([r, row(event_id="e2", status="error", score=None).as_error("refused: \ud800")], "tok-utf8")
    got = store.query(
        f"SELECT event_id, reasoning, metadata, error FROM {store.qualified_table} ORDER BY event_id"
    ).rows
    assert got == [("e1", "r\ufffd", {"k\ufffd": "v\ufffd"}, ""), ("e2", "", {}, "refused: \ufffd")]


def test_nul_is_stored_byte_for_byte(store: ClickHouseStore) -> None:
    """A NUL is valid UTF-8: the row keeps it and ClickHouse returns it unchanged."""
    store.insert_rows([row(response="a\u0000b", metadata={"k": "\u0000"})], "tok-nul")
    assert store.query(f"SELECT response, metadata FROM {store.qualified_table}").rows == [
        ("a\u0000b", {"k": "\u0000"})
    ]


_texts = st.one_of(st.text(max_size=6), st.sampled_from(["\ud800", "a\udfffb", "é", "\x00", ""]))


@settings(max_examples=examples(300), deadline=None)
@given(
    st.fixed_dictionaries(
        {
            "reasoning": _texts,
            "statements": st.lists(_texts, max_size=3),
            "metadata": st.dictionaries(_texts, _texts, max_size=2),
            "redactions": st.dictionaries(_texts, st.integers(0, 5), max_size=2),
            "question": _texts,
            "error": st.one_of(_texts, st.integers()),
        }
    )
)
def test_a_row_passed_on_as_is_equals_the_row_built_by_copying_every_value(fields: dict[str, Any]) -> None:
    """Rows whose values need no repair skip the copy; either way the row, or the refusal, is the same."""
    fields = {**fields, "verdicts": ["yes"] * len(fields["statements"]), "n_statements": len(fields["statements"])}

    def build() -> object:
        try:
            return row(**fields)
        except ValueError as e:
            return str(e)

    fast = build()
    with patch.object(scored, "_storable_as_is", lambda _: False):
        assert build() == fast


def test_a_clean_row_is_validated_from_the_values_given() -> None:
    """`_storable` hands a row without anything to cap or replace to validation as it is, with no copy."""
    data = {"event_id": "e", "statements": ["a."], "metadata": {"k": "é"}}
    assert ScoredRow._storable(data) is data
    assert ScoredRow._storable({**data, "statements": ["\ud800"]}) == {**data, "statements": ["\ufffd"]}
