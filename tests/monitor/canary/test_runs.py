"""Canary runs against the real store (chDB) and, for the LLM judges, the fake Messages API: one row per pair, the
figures the lexical judge gets on the golden set, idempotent writes, the schedule on a driven clock (no sleeps),
errors from injected faults, and a run cut off at its deadline."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from monitor.calibration.labels import golden_path, read_labels
from monitor.canary.service import Canary, CanarySettings
from monitor.config import Settings, load_settings
from monitor.store.connection import ClickHouseStore
from schemas.canary import CANARY_TABLE, COLUMNS
from tests.fake_messages_api import FakeMessagesAPI, bad_request, overloaded

T0 = datetime(2026, 11, 2, 9, 0, 5, tzinfo=UTC)
HOUR = timedelta(hours=1)


def canary(store: ClickHouseStore, settings: Settings | None = None, *, background: bool = False, **kw: Any) -> Canary:
    """A canary on the shipped golden set with `settings`' judge (lexical by default), judging within the tick."""
    s = settings or load_settings(judge="lexical")
    cs = CanarySettings(
        kw.pop("interval", HOUR), kw.pop("labels_file", golden_path()), s.judge, s.flow, s.redaction, **kw
    )
    return Canary(store, cs, background=background)


def stored(store: ClickHouseStore, what: str = "count()", where: str = "1") -> list[tuple[Any, ...]]:
    """Rows of a query over the canary table (FINAL)."""
    return store.query(f"SELECT {what} FROM {store.database}.{CANARY_TABLE} FINAL WHERE {where}").rows


def test_a_run_writes_one_row_per_pair_with_the_lexical_judges_figures(store: ClickHouseStore) -> None:
    """A lexical run writes 107 rows, one per first-turn pair (it reads no context, so the multi-turn cases are left
    out), each with ρ 0.430, κ 0.423, mean shift −0.072, no errors, no cost."""
    c = canary(store)
    tick = c.tick(T0)
    assert tick.written is not None and tick.started and not tick.failed and tick.next_due == T0 + HOUR
    golden = [p for p in read_labels(golden_path()) if not p.context]
    assert len(golden) == 107
    rows = stored(
        store,
        "pair_id, label, status, run_spearman, run_kappa, run_mean_shift, run_error_rate, run_pairs, cost_usd, run_at",
    )
    assert sorted(r[0] for r in rows) == sorted(p.key for p in golden)
    assert {r[1:3] for r in rows} == {(p.label, "ok") for p in golden}
    figures = {r[3:8] for r in rows}
    assert len(figures) == 1  # the run's figures, the same on every row
    rho, kappa, shift, error_rate, pairs = figures.pop()
    assert (round(rho, 3), round(kappa, 3), round(shift, 3), error_rate, pairs) == (0.430, 0.423, -0.072, 0.0, 107)
    assert {r[8] for r in rows} == {0.0} and {r[9].replace(tzinfo=UTC) for r in rows} == {T0}
    f = tick.written.figures
    assert (f.spearman, f.kappa, f.mean_shift) == pytest.approx((rho, kappa, shift))
    assert stored(store, "any(labels), any(judge_id)") == [(c.labelled.name, c.judge.judge_id)]
    assert c.labelled.name.startswith("golden_set.jsonl:") and len(c.labelled.name.split(":")[1]) == 12


def test_writing_a_run_again_leaves_one_row_per_run_and_pair(store: ClickHouseStore) -> None:
    """A run inserted twice (a retried write) still reads as one row per (run_id, pair_id) with FINAL."""
    c = canary(store)
    c.tick(T0)
    [(run_id,)] = stored(store, "any(run_id)")
    rows = [list(r) for r in store.query(f"SELECT {', '.join(COLUMNS)} FROM {store.database}.{CANARY_TABLE}").rows]
    for r in rows:
        r[COLUMNS.index("written_at")] = datetime.now(UTC)
    store.insert_table(CANARY_TABLE, COLUMNS, rows)
    assert store.query(f"SELECT count() FROM {store.database}.{CANARY_TABLE}").rows[0][0] == 214  # before a merge
    assert stored(store, "count(), uniqExact(run_id, pair_id), any(run_id)") == [(107, 107, run_id)]


def test_the_schedule_runs_at_the_interval_and_not_more_often(store: ClickHouseStore) -> None:
    """Ticked every 10 minutes for 5 hours, a 1h canary runs 6 times an hour apart; a restart waits for the stored
    run."""
    c = canary(store)
    started = [t for k in range(31) if c.tick(t := T0 + timedelta(minutes=10 * k)).started]
    assert started == [T0 + HOUR * h for h in range(6)]
    assert not c.tick(T0 + 6 * HOUR - timedelta(seconds=1)).started
    runs = sorted(r[0].replace(tzinfo=UTC) for r in stored(store, "run_at", "1 GROUP BY run_at"))
    assert runs == started and stored(store) == [(6 * 107,)]

    restarted = canary(store)
    early = restarted.tick(T0 + 5 * HOUR + timedelta(minutes=30))
    assert not early.started and early.next_due == T0 + 6 * HOUR
    assert restarted.tick(T0 + 6 * HOUR).started

    other = canary(store, labels_file=golden_path())  # the same set: the same history
    assert not other.tick(T0 + 6 * HOUR + timedelta(minutes=1)).started


def test_a_changed_labelled_set_starts_its_own_history(store: ClickHouseStore, tmp_path: Path) -> None:
    """Another labels file (here: the golden set less one pair) is another `labels` name, due at once beside the
    first."""
    canary(store).tick(T0)
    lines = golden_path().read_text(encoding="utf-8").splitlines()[1:]
    smaller = tmp_path / "golden_set.jsonl"
    smaller.write_text("\n".join(lines) + "\n", encoding="utf-8")
    c = canary(store, labels_file=smaller)
    assert c.labelled.name.startswith("golden_set.jsonl:") and c.tick(T0 + timedelta(minutes=5)).started
    assert sorted(stored(store, "labels, count()", "1 GROUP BY labels")) == sorted(
        [(c.labelled.name, 106), (canary(store).labelled.name, 107)]
    )


def test_in_the_background_a_run_is_written_at_a_later_round_and_never_twice_at_once(store: ClickHouseStore) -> None:
    """`alerts run`'s mode: the round starts the run and goes on; a later round writes it; none starts meanwhile."""
    c = canary(store, background=True)
    try:
        first = c.tick(T0)
        assert first.started and first.running and first.written is None
        assert c.wait(timeout=60)
        second = c.tick(T0 + timedelta(minutes=1))
        assert second.written is not None and second.written.run_at == T0 and not second.started
        assert stored(store) == [(107,)]
    finally:
        c.close()


def test_errors_are_counted_per_pair_and_in_the_run(store: ClickHouseStore, fake_messages_api: FakeMessagesAPI) -> None:
    """30 requests refused (400) are 30 error rows with the reason, in the run's error rate; spend is on the rows and
    the run."""
    fake_messages_api.script(*[bad_request("refused by the test")] * 30)
    settings = load_settings(judge="rubric", **fake_messages_api.settings_overrides())
    tick = canary(store, settings).tick(T0)
    assert tick.written is not None and tick.written.figures.errors == 30 and tick.written.figures.pairs == 138
    rows = stored(store, "status, error, cost_usd, input_tokens, run_errors, run_error_rate, run_cost_usd, run_calls")
    errors = [r for r in rows if r[0] == "error"]
    assert len(errors) == 30 and all(r[1].startswith("api_error: ") for r in errors)
    assert {r[4] for r in rows} == {30} and all(r[5] == pytest.approx(30 / 138) for r in rows)
    scored_cost = sum(r[2] for r in rows if r[0] == "ok")
    assert scored_cost > 0 and rows[0][6] == pytest.approx(scored_cost)  # refused calls cost nothing
    assert rows[0][7] == 138 and sum(r[3] for r in rows if r[0] == "ok") > 0  # one judge call per pair, none retried
    empty = sum(1 for p in read_labels(golden_path()) if not p.answer.strip())  # scored 0 without a request
    assert len(fake_messages_api.message_requests) == 138 - empty


def test_pairs_still_unscored_at_the_deadline_are_errors(
    store: ClickHouseStore, fake_messages_api: FakeMessagesAPI
) -> None:
    """With the provider down, every pair that needed a call is an error row at the run's deadline (mostly `deadline:
    ...`)."""
    fake_messages_api.fail_for(60, overloaded())
    # Every pair gets a slot at once, so the six that need no call are scored however loaded the machine is; the
    # others fail, open the circuit and wait for it until the deadline.
    settings = load_settings(
        judge="rubric", judge_max_retries=0, judge_event_attempts=1, judge_concurrency=128,
        **fake_messages_api.settings_overrides(),
    )  # fmt: skip
    tick = canary(store, settings, deadline=timedelta(seconds=2)).tick(T0)
    assert tick.written is not None
    rows = stored(store, "status, error, pair_id")
    empty = {p.key for p in read_labels(golden_path()) if not p.answer.strip()}  # scored 0 without a call
    assert empty and {r[2] for r in rows if r[0] == "ok"} == empty
    reasons = {r[1].split(":")[0] for r in rows if r[0] == "error"}
    assert "deadline" in reasons and reasons <= {"deadline", "unavailable"}
    assert tick.written.figures.errors == 138 - len(empty)
