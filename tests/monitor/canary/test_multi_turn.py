"""The golden set's multi-turn cases in canary runs: an LLM judge is handed each with its context cut to the live
judge's window, its brief and turn index; the lexical heuristic, which reads no context, is run without them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

import monitor.canary.run as run_module
from monitor.calibration.labels import golden_path, read_labels
from monitor.canary.run import pairs_for, read_labelled_set
from monitor.canary.service import Canary, CanarySettings
from monitor.config import load_settings
from monitor.judges.base import JudgeInfo
from monitor.store.connection import ClickHouseStore
from tests.fake_messages_api import FakeMessagesAPI
from tests.monitor.calibration.test_run import _Recorder

T0 = datetime(2026, 11, 2, 9, 0, 5, tzinfo=UTC)


def test_a_heuristic_judge_runs_the_first_turn_cases_and_an_llm_judge_all() -> None:
    """`pairs_for` keeps the set's order: every pair for an LLM judge, only those without context for a heuristic."""
    labelled = read_labelled_set(golden_path())
    multi = [p for p in labelled.pairs if p.context]
    assert len(multi) >= 22
    assert pairs_for(labelled, JudgeInfo("rubric", "m", "rubric-1")) == labelled.pairs
    lexical = pairs_for(labelled, JudgeInfo("lexical", "heuristic", "lexical-1", heuristic=True))
    assert lexical == tuple(p for p in labelled.pairs if not p.context) and len(lexical) == len(labelled.pairs) - len(
        multi
    )


def test_an_llm_canary_run_hands_the_judge_the_context_in_the_live_window(
    store: ClickHouseStore, fake_messages_api: FakeMessagesAPI, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With MONITOR_JUDGE_CONTEXT_TURNS=1, each multi-turn case reaches the judge with its newest earlier turn, its
    brief and its turn index; the run scores every pair of the set, multi-turn ones included."""
    recorder = _Recorder(monkeypatch, run_module)
    settings = load_settings(judge="rubric", judge_context_turns=1, **fake_messages_api.settings_overrides())
    cs = CanarySettings(timedelta(hours=1), golden_path(), settings.judge, settings.flow, settings.redaction)
    tick = Canary(store, cs, background=False).tick(T0)
    golden = read_labels(golden_path())
    assert tick.written is not None and tick.written.figures.pairs == len(golden) and tick.written.figures.errors == 0
    by_id = {e.event_id: e for e in recorder.events}
    multi = [p for p in golden if p.context]
    assert multi and {p.key for p in multi} <= set(by_id)
    for pair in multi:
        event = by_id[pair.key]
        assert event.context == pair.context[-1:] and event.turn == pair.turn >= 1, pair.key
        assert (event.system, event.shape) == (pair.system, "chat"), pair.key
    assert all(by_id[p.key].context == () for p in golden if not p.context)
