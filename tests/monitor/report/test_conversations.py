"""The report's worst conversations, against the real embedded store: beside the worst answers, the conversations
with the lowest share of relevant turns (two or more judged), each with its lowest turn, counted once over
re-deliveries, escaped, and none ranked without a verdict."""

from __future__ import annotations

import re
import uuid
from datetime import timedelta
from pathlib import Path

from monitor.report import write_report
from monitor.store.connection import ClickHouseStore
from schemas.scored import ScoredRow
from tests.monitor.report.conftest import LEXICAL_JUDGE, T0, make_row, read_page


def _turn(conversation: str, turn: int, score: float | None, question: str = "and the second one?") -> ScoredRow:
    row = make_row(
        T0 + timedelta(minutes=10 + turn),
        app="shop",
        prompt_version="v1",
        judge_id=LEXICAL_JUDGE,
        score=score,
        question=question,
        response=f"answer {turn}",
    )
    return row.model_copy(update={"conversation_id": conversation, "event_id": f"{conversation}-{turn}", "turn": turn})


def _section(html: str) -> str:
    match = re.search(r'<section id="worst-conversations">(.*?)</section>', html, re.DOTALL)
    assert match, "no worst-conversations section"
    return match.group(1)


def test_the_worst_conversations_are_listed_lowest_share_first_with_their_lowest_turn(
    store: ClickHouseStore, tmp_path: Path
) -> None:
    """`lost-thread` (1 of 3 turns relevant, lowest turn 2, its question escaped) comes before `mostly-fine` (2 of
    3); a single-turn conversation and one with only failed calls are not ranked; a re-delivered turn counts once."""
    rows = [
        _turn("lost-thread", 0, 0.9),
        _turn("lost-thread", 1, 0.4),
        _turn("lost-thread", 2, 0.1, question="<b>and the other one?</b>"),
        _turn("mostly-fine", 0, 0.8),
        _turn("mostly-fine", 1, 0.7),
        _turn("mostly-fine", 2, 0.3),
        _turn("one-turn", 0, 0.0),
        _turn("all-failed", 0, None, question="x"),
        _turn("all-failed", 1, None, question="x"),
    ]
    store.insert_rows(rows, uuid.uuid4().hex)
    store.insert_rows(rows[:3], uuid.uuid4().hex)  # a redelivery: FINAL counts it once
    write_report(store, T0, T0 + timedelta(hours=1), tmp_path / "c.html")
    section = _section(read_page(tmp_path / "c.html"))
    assert "Worst conversations" in section
    assert section.index("lost-thread") < section.index("mostly-fine")
    assert "one-turn" not in section and "all-failed" not in section
    lost = section[section.index("lost-thread") - 200 : section.index("mostly-fine")]
    assert "33.3 % of 3" in lost and "&lt;b&gt;and the other one?&lt;/b&gt;" in lost and "<b>and" not in lost
    assert '<td class="n">2</td><td class="n">0.100</td>' in lost  # its lowest turn and that turn's score
    assert "66.7 % of 3" in section
    assert "conversation_id = &#39;lost-thread&#39;" in lost  # the line that lists its turns


def test_no_multi_turn_conversation_says_so(store: ClickHouseStore, tmp_path: Path) -> None:
    """Only single-turn conversations: the section is there and says none has two judged turns."""
    store.insert_rows([_turn("solo", 0, 0.2)], uuid.uuid4().hex)
    write_report(store, T0, T0 + timedelta(hours=1), tmp_path / "s.html")
    assert "No conversation in this range has two or more judged turns." in _section(read_page(tmp_path / "s.html"))
