"""`relevancy-monitor labels export` and `calibrate --labels store` on chDB: the export is the labelled set calibrate
reads (one pair per label), the store path reads the very same pairs, and calibrate's κ for the lexical judge (value
and interval) is the agreement report's κ of that judge over the same labels. A store that kept no text refuses."""

from __future__ import annotations

import json
import logging
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import structlog

from monitor.calibration.agreement import DEFAULT_BOOTSTRAP
from monitor.cli.main import main
from monitor.judges.lexical import LexicalJudge, score_lexical
from monitor.review.agreement import agreement_report
from monitor.review.label_rows import LabelWriter, NewLabel
from monitor.store.connection import ClickHouseStore
from tests.monitor.calibration.test_calibrate_cli import HAND_SET, QUESTION
from tests.monitor.review.scored import NOW, row, write

LEXICAL = LexicalJudge().info.judge_id


@pytest.fixture
def store_env(
    store: ClickHouseStore, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> ClickHouseStore:
    """No MONITOR_* variable but the test store's URL and database; 80 columns. `calibrate` configures logging onto
    the captured stderr: the configuration is restored afterwards, so later tests do not log to a closed file."""
    structlog_before = structlog.get_config()
    handlers_before = list(logging.getLogger().handlers)
    request.addfinalizer(lambda: structlog.configure(**structlog_before))
    request.addfinalizer(lambda: setattr(logging.getLogger(), "handlers", handlers_before))
    for var in list(os.environ):
        if var.startswith(("MONITOR_", "ANTHROPIC_")):
            monkeypatch.delenv(var)
    monkeypatch.setenv("MONITOR_CLICKHOUSE_URL", store.url)
    monkeypatch.setenv("MONITOR_CLICKHOUSE_DATABASE", store.database)
    monkeypatch.setenv("COLUMNS", "80")
    return store


def _fill(store: ClickHouseStore, *, text: bool = True) -> None:
    """The six hand pairs as answers: the primary rubric row (with the text unless `text` is off) and the lexical
    judge's row with the score it gives that text; ann labels all six, bob the first three (another route)."""
    for n, (_, answer) in enumerate(HAND_SET, start=1):
        q, a = (QUESTION, answer) if text else ("", "")
        scored = row(f"e{n}", 0.5, question=q, response=a)
        write(store, [scored.model_copy(update={"question": q, "response": a})])
        lexical = score_lexical(QUESTION, answer).score
        write(
            store,
            [row(f"e{n}", lexical, judge_id=LEXICAL, shadow=True).model_copy(update={"question": q, "response": a})],
        )
    writer = LabelWriter(ClickHouseStore(store.url, store.database, store.table))
    for n, (value, _) in enumerate(HAND_SET, start=1):
        writer.record(store, NewLabel(f"e{n}", "ann", value, "note" if n == 1 else "", "control", 0.1), NOW)
    for n, value in zip(range(1, 4), (1, 1, 3)):
        writer.record(store, NewLabel(f"e{n}", "bob", value, "", "borderline", 0.3), NOW + timedelta(minutes=1))


def _calibrate(capsys: pytest.CaptureFixture[str], *labels: str) -> dict[str, Any]:
    assert main(["calibrate", "--labels", *labels, "--judge", "lexical", "--json"]) == 0
    doc: dict[str, Any] = json.loads(capsys.readouterr().out)
    return doc


def test_export_writes_one_pair_per_label_that_calibrate_reads(
    store_env: ClickHouseStore, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Nine labels (six by ann, three by bob) become nine lines ordered by event and reviewer, with the stored text,
    the label, the app as category and the route as tag; calibrate judges all nine."""
    _fill(store_env)
    out = tmp_path / "labels.jsonl"
    assert main(["labels", "export", "--out", str(out)]) == 0
    assert "9 labels written" in capsys.readouterr().err
    lines = [json.loads(x) for x in out.read_text(encoding="utf-8").splitlines()]
    assert [x["id"] for x in lines] == ["e1:ann", "e1:bob", "e2:ann", "e2:bob", "e3:ann", "e3:bob", "e4:ann", "e5:ann",
                                        "e6:ann"]  # fmt: skip
    assert lines[0] == {
        "id": "e1:ann", "question": QUESTION, "response": HAND_SET[0][1], "label": 0, "category": "shop",
        "tags": ["control"], "rationale": "note",
    }  # fmt: skip
    assert lines[1]["tags"] == ["borderline"] and lines[1]["label"] == 1
    doc = _calibrate(capsys, str(out))
    assert doc["judged"] == 9 and doc["judge"]["judge_id"] == LEXICAL


def test_calibrate_from_the_store_prints_the_agreement_reports_kappa(
    store_env: ClickHouseStore, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`calibrate --labels store` with the lexical judge: the same κ, value and interval, as the exported file gives
    and as the agreement report's `everything` for the lexical judge_id over the same labels (same bootstrap)."""
    _fill(store_env)
    out = tmp_path / "labels.jsonl"
    assert main(["labels", "export", "--out", str(out)]) == 0
    capsys.readouterr()
    from_file = _calibrate(capsys, str(out))["statistics"]["weighted_kappa_quadratic"]
    from_store = _calibrate(capsys, "store")["statistics"]["weighted_kappa_quadratic"]
    report = agreement_report(store_env, datetime(1970, 1, 1, tzinfo=UTC), datetime.now(UTC), DEFAULT_BOOTSTRAP)
    lexical = next(j for j in report.judges if j.judge_id == LEXICAL)
    assert lexical.n_everything == 9
    assert from_store == from_file
    assert from_store["value"] == lexical.everything.value and from_store["value"] is not None
    assert from_store["ci"] == list(lexical.everything.ci or ())
    assert from_store["resamples_used"] == lexical.everything.resamples_used
    assert main(["calibrate", "--labels", "store", "--judge", "lexical"]) == 0
    table = capsys.readouterr().out
    low, high = lexical.everything.ci or (0.0, 0.0)
    assert f"{lexical.everything.value:.3f}" in table and f"{low:.3f} to {high:.3f}" in table


def test_a_store_without_text_refuses_in_one_line(
    store_env: ClickHouseStore, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Rows stored under MONITOR_STORE_TEXT=none (empty text): export and calibrate --labels store each refuse in
    one line naming the setting, and no file is written."""
    _fill(store_env, text=False)
    out = tmp_path / "labels.jsonl"
    assert main(["labels", "export", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "9 of 9 labelled answers have no stored text" in err and "MONITOR_STORE_TEXT=none" in err
    assert err.count("\n") == 1 and not out.exists()
    assert main(["calibrate", "--labels", "store", "--judge", "lexical"]) == 2
    assert "have no stored text" in capsys.readouterr().err


def test_since_and_until_choose_the_labels(store_env: ClickHouseStore, capsys: pytest.CaptureFixture[str]) -> None:
    """--since after ann's labels leaves bob's three; a range with no label refuses in one line."""
    _fill(store_env)
    since = (NOW + timedelta(seconds=30)).isoformat()
    assert main(["labels", "export", "--since", since, "--out", "-"]) == 0
    got = [json.loads(x)["id"] for x in capsys.readouterr().out.splitlines()]
    assert got == ["e1:bob", "e2:bob", "e3:bob"]
    assert main(["labels", "export", "--since", "2020-01-01", "--until", "2020-02-01", "--out", "-"]) == 2
    assert "no labels in this range" in capsys.readouterr().err
