"""Why a rule without segments has none: a typed reason that `why_empty` chooses from the engine's look-ups (the newest
rows of the rule and of its table, versions after the window), told in one sentence by `describe_empty`; and
`alerts check` on live rows without a shadow judge, whose shadow rules name the missing judge."""

from __future__ import annotations

import argparse
import io
import json
import re
from datetime import timedelta
from typing import get_args

import pytest

from monitor.alerts.engine import evaluate_rules
from monitor.alerts.outcomes import (
    CANARY_INTERVAL_VARIABLE,
    SHADOW_JUDGE_VARIABLE,
    SHADOW_METHODS,
    SHADOW_RATE_VARIABLE,
    EmptyFacts,
    EmptyRule,
    Gap,
    LateVersion,
    Newest,
    describe_empty,
    why_empty,
)
from monitor.alerts.rules import Rule, load_rules
from monitor.alerts.settings import ALERTS_PREFIX, AlertSettings
from monitor.alerts.windows import windows_for
from monitor.cli.alerts import register, run_check
from monitor.judging.settings import ShadowSettings
from monitor.store.connection import ClickHouseStore
from schemas.settings import MONITOR_PREFIX, fields_by_setting
from tests.monitor.alerts.conftest import T0, default_rules, insert, make_row, noisy, stream

NOW = T0 + timedelta(hours=12, minutes=30)
SHADOW_RULES = ("shadow_agreement_drop", "shadow_divergence_higher", "shadow_divergence_lower")


def _rule(name: str) -> Rule:
    return default_rules(name).rules[0]


def _empty(name: str, facts: EmptyFacts) -> EmptyRule:
    rule = _rule(name)
    return why_empty(rule, windows_for(rule, NOW), facts)


def _at(**ago: float) -> Newest:
    """The rule's newest row (`mine` minutes ago, absent when not given) and its table's (`table` minutes ago)."""
    mine, table = ago.get("mine"), ago.get("table")
    return Newest(
        NOW - timedelta(minutes=mine) if mine is not None else None,
        NOW - timedelta(minutes=table) if table is not None else None,
    )


# ---- the reasons, from the facts (pure) ----------------------------------------------------------------------------


def test_a_shadow_rule_on_judged_rows_without_a_shadow_row_names_the_missing_shadow_judge() -> None:
    """Judged rows but never a shadow judge's: the reason is no shadow judge, the sentence names the setting and
    quotes no time or count."""
    e = _empty("shadow_agreement_drop", EmptyFacts(newest=_at(table=1)))
    assert e.gap is Gap.NO_SHADOW_JUDGE
    text = describe_empty(e, NOW)
    assert text.startswith("no shadow judge configured: the store has judged rows, none of them a shadow judge's")
    assert "set MONITOR_SHADOW_JUDGE to lexical, rubric or statements for `relevancy-monitor run`" in text
    assert not re.search(r"\d", text)  # neither a count nor a time that another rule could contradict


def test_the_settings_the_explanations_name_are_the_real_ones() -> None:
    """The shadow judge's variables and methods and the canary interval's variable named in the sentences exist."""
    shadow = fields_by_setting(ShadowSettings)
    assert SHADOW_JUDGE_VARIABLE == MONITOR_PREFIX + "SHADOW_JUDGE" and "shadow_judge" in shadow
    assert SHADOW_RATE_VARIABLE == MONITOR_PREFIX + "SHADOW_SAMPLE_RATE" and "shadow_sample_rate" in shadow
    assert SHADOW_METHODS == get_args(get_args(ShadowSettings.model_fields["method"].annotation)[0])
    assert (
        CANARY_INTERVAL_VARIABLE == ALERTS_PREFIX + "CANARY_INTERVAL"
        and "canary_interval" in AlertSettings.model_fields
    )
    assert AlertSettings.model_fields["canary_interval"].default == timedelta(hours=1)  # "hourly by default"


def test_an_empty_canary_table_says_how_canary_runs_are_made() -> None:
    """No canary run at all: the sentence says that `alerts run` writes them every ALERTS_CANARY_INTERVAL and
    `alerts check` none."""
    e = _empty("canary_agreement_floor", EmptyFacts(newest=_at()))
    assert e.gap is Gap.STORE_EMPTY
    assert describe_empty(e, NOW) == (
        "no canary run in the store yet (`relevancy-monitor alerts run` re-scores the labelled canary pairs every "
        "ALERTS_CANARY_INTERVAL, hourly by default, never when it is 0 or off; `alerts check` runs none)"
    )


def test_an_empty_scores_table_reads_the_same_for_score_and_shadow_rules() -> None:
    """No judged row at all: every rule over the scores table, shadow ones included, says the store has none yet."""
    for name in ("relevancy_floor", "shadow_agreement_drop"):
        e = _empty(name, EmptyFacts(newest=_at()))
        assert (e.gap, describe_empty(e, NOW)) == (Gap.STORE_EMPTY, "no judged rows in the store yet")


def test_only_replayed_rows_in_the_store_are_not_an_empty_store() -> None:
    """Rows, but only replayed ones, for a rule leaving replays out: it says so and how to read them."""
    e = _empty("relevancy_floor", EmptyFacts(newest=_at(table=5)))
    assert e.gap is Gap.ONLY_REPLAYS
    assert describe_empty(e, NOW) == (
        "no live rows in the store, only rows of `relevancy-monitor replay`, which this rule leaves out "
        "(`include_replays: true` reads them)"
    )


def test_a_shadow_judge_turned_off_before_the_window_is_no_shadow_row_in_it() -> None:
    """Shadow rows hours before the window, the primary's in it: the sentence names the newest shadow row, not the
    primary's."""
    facts = EmptyFacts(newest=_at(mine=8 * 60, table=1), by_end=_at(mine=8 * 60, table=11))
    e = _empty("shadow_divergence_lower", facts)
    assert e.gap is Gap.ONLY_OTHER_ROWS
    assert describe_empty(e, NOW) == (
        "no shadow judge's rows between 06:20 and 12:20, only the primary judge's (newest shadow row 04:30; "
        "MONITOR_SHADOW_JUDGE turns the shadow judge on)"
    )


def test_a_shadow_judge_turned_on_after_the_window_says_the_offset_hides_it() -> None:
    """Shadow rows only after the window's end: the sentence says the window ends `offset` before now."""
    e = _empty("shadow_agreement_drop", EmptyFacts(newest=_at(mine=5, table=1), by_end=_at(table=11)))
    assert e.gap is Gap.ONLY_OTHER_ROWS
    assert describe_empty(e, NOW) == (
        "no shadow judge's rows between 06:20 and 12:20, only the primary judge's (the window ends `offset` 10m "
        "before now; newest shadow row 12:25; MONITOR_SHADOW_JUDGE turns the shadow judge on)"
    )


def test_replayed_rows_in_the_window_of_a_rule_leaving_them_out() -> None:
    """Replayed rows in the window and live ones only before it: the sentence names the newest live row."""
    e = _empty("relevancy_floor", EmptyFacts(newest=_at(mine=3 * 60, table=5), by_end=_at(mine=3 * 60, table=5)))
    assert e.gap is Gap.ONLY_OTHER_ROWS
    assert describe_empty(e, NOW) == (
        "no live rows between 11:58 and 12:28, only replayed ones, which this rule leaves out (newest live row "
        "09:30; `include_replays: true` reads them)"
    )


def test_shadow_rows_in_the_window_without_an_event_shared_with_the_primary() -> None:
    """Shadow rows in the window but no segment: no event both judges scored ok, not "no rows"."""
    e = _empty("shadow_agreement_drop", EmptyFacts(newest=_at(mine=60, table=1)))
    assert e.gap is Gap.NO_SHARED_EVENTS
    assert describe_empty(e, NOW) == (
        "no event that both the shadow judge and its primary scored ok between 06:20 and 12:20, though the shadow "
        "judge has rows there (one of the two failed on each, or the primary's row is missing)"
    )


def test_a_quiet_store_names_the_newest_row_of_the_rule() -> None:
    """No row of the table in the window either: "no rows" with the rule's own newest row (a shadow row for a shadow
    rule)."""
    e = _empty("shadow_agreement_drop", EmptyFacts(newest=_at(mine=20 * 60, table=19 * 60)))
    assert e.gap is Gap.NO_ROWS
    assert (
        describe_empty(e, NOW) == "no shadow judge's rows between 06:20 and 12:20 (newest shadow row 2026-11-01 16:30)"
    )


def test_a_rollout_whose_new_version_the_offset_hides_names_it() -> None:
    """No rollout in the window, with a version first seen after its end: the sentence names the version, its
    segment and the offset."""
    late = (LateVersion((("app", "support-bot"), ("judge_id", "j1")), "v13", NOW - timedelta(minutes=1)),)
    # The shipped rollout rules read up to now (offset 0s); a rules file may hold the window back for late rows.
    rule = _rule("prompt_rollout_regression").model_copy(update={"offset": timedelta(minutes=2)})
    facts = EmptyFacts(single_version=3, late=late, newest=_at(mine=0.5, table=0.5))
    e = why_empty(rule, windows_for(rule, NOW), facts)
    assert (e.gap, e.late) == (Gap.NO_ROLLOUT, late)
    assert describe_empty(e, NOW) == (
        "no rollout in the window: 3 segments with a single prompt_version; prompt_version v13 (app=support-bot) "
        "first seen 12:29, after the window's end (`offset` 2m before now): compared once the window reaches it"
    )


# ---- the facts, from the store -------------------------------------------------------------------------------------


def test_the_engine_finds_the_new_prompt_version_the_offset_hides(store: ClickHouseStore) -> None:
    """A prompt version first seen a minute and a half ago: a rollout rule whose window ends 2 minutes back has no
    rollout in it and names that version as after the window's end."""
    app = [{"app": "support-bot"}]
    insert(
        store, stream(NOW - timedelta(hours=8), NOW, per_minute=1, segments=app, score=noisy(0.8), prompt_version="v12")
    )
    insert(
        store,
        [make_row(NOW - timedelta(seconds=90 - 10 * k), app="support-bot", prompt_version="v13") for k in range(9)],
    )
    shipped = default_rules("prompt_rollout_regression")
    held_back = [r.model_copy(update={"offset": timedelta(minutes=2)}) for r in shipped.rules]  # a file's offset
    [e] = evaluate_rules(store, shipped.model_copy(update={"rules": held_back}), NOW, {}).empty
    assert (e.gap, e.single_version, [(v.name, v.scope) for v in e.late]) == (
        Gap.NO_ROLLOUT,
        1,
        [("v13", (("app", "support-bot"), ("judge_id", "j1")))],
    )
    assert "prompt_version v13 (app=support-bot) first seen 12:28" in describe_empty(e, NOW)


def test_the_engine_tells_failed_shadow_rows_from_a_shadow_judge_turned_off(store: ClickHouseStore) -> None:
    """Shadow rows that all failed in the window are no shared event; shadow rows only long before it are a shadow
    judge turned off."""
    primary = stream(NOW - timedelta(hours=7), NOW, per_minute=1, segments=[{"app": "a"}], score=noisy(0.8))
    insert(store, primary)
    shadow = dict(judge_id="js", sample_rule="shadow:base")
    insert(store, [make_row(r.event_time, event_id=r.event_id, **shadow, score=0.7) for r in primary[:30]])
    rules = default_rules(*SHADOW_RULES)
    assert {e.gap for e in evaluate_rules(store, rules, NOW, {}).empty} == {Gap.ONLY_OTHER_ROWS}
    in_window = [r for r in primary if NOW - timedelta(hours=5) <= r.event_time < NOW - timedelta(hours=4)]
    insert(store, [make_row(r.event_time, event_id=r.event_id, **shadow, status="error") for r in in_window])
    empty = evaluate_rules(store, rules, NOW, {}).empty
    assert [e.gap for e in empty] == [Gap.NO_SHARED_EVENTS] * 3


# ---- `alerts check` ------------------------------------------------------------------------------------------------


def parse(*argv: str) -> argparse.Namespace:
    """Parse `argv` with a parser that holds only the `alerts` commands."""
    parser = argparse.ArgumentParser(prog="relevancy-monitor")
    register(parser.add_subparsers(dest="command", required=True))
    return parser.parse_args(list(argv))


@pytest.fixture
def live_without_shadow(store: ClickHouseStore, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Seven hours of live judged rows of two apps and no shadow judge; the flags of `alerts check` at NOW."""
    monkeypatch.delenv("ALERTS_RULES", raising=False)
    segments = [{"app": "support-bot"}, {"app": "travel-agent"}]
    insert(store, stream(NOW - timedelta(hours=7), NOW, per_minute=2, segments=segments, score=noisy(0.8)))
    return ["--clickhouse-url", store.url, "--clickhouse-database", store.database, "--at", NOW.isoformat()]


def test_check_on_live_rows_without_a_shadow_judge_names_it_and_no_contradicting_count(
    live_without_shadow: list[str],
) -> None:
    """`alerts check`: each shadow rule's line names the missing shadow judge and its setting, with no row count or
    newest-row time, while the score rules over the same hours count the rows."""
    out = io.StringIO()
    assert run_check(parse("alerts", "check", *live_without_shadow, "--json", "--no-state"), out) == 0
    rows = [json.loads(line) for line in out.getvalue().splitlines()]
    assert {r["rule"] for r in rows} == {r.name for r in load_rules().rules}
    shadow = [r for r in rows if r["rule"] in SHADOW_RULES]
    assert len(shadow) == 3
    for r in shadow:
        assert r["segment"] is None and r["no_decision"] == [{"gap": "no_shadow_judge", "newest": None}]
        assert r["reason"].startswith("no shadow judge configured") and "MONITOR_SHADOW_JUDGE" in r["reason"]
        assert not re.search(r"\d", r["reason"]) and "newest" not in r["reason"]
    # The neighbours do see the judged rows of the shadow rules' hours: nothing above contradicts them.
    drops = [r for r in rows if r["rule"] == "relevancy_drop"]
    assert len(drops) == 2 and all(r["n_current"] > 600 for r in drops)

    table = io.StringIO()
    run_check(parse("alerts", "check", *live_without_shadow, "--no-state"), table)
    words = " ".join(table.getvalue().split())
    assert words.count("no shadow judge configured: the store has judged rows, none of them a shadow judge's") == 3
    assert "no judged rows between" not in words
