"""The scale-out benchmark: its window over scraped samples, the metric and setting names it relies on, and a tiny run
end to end (1, 2 and 4 `relevancy-monitor run` replicas in one group, so that CI runs it). No rate or speed-up is
asserted (they depend on the machine and its load); the tiny run checks that every run had a window in which every
replica held a share and counted events."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from prometheus_client import generate_latest

from bench import scale_out
from bench.scale_out import Sample
from monitor.config import SETTINGS, load_settings
from monitor.devtools.localbroker import LocalBroker
from monitor.runtime.metrics import Metrics


def sample(wall: float, consumed: tuple[float, ...], shares: tuple[float, ...]) -> Sample:
    """A scrape at `wall` whose replicas used 1 ms of CPU per event and the broker none."""
    return Sample(wall, consumed, shares, tuple(c / 1000 for c in consumed), 0.0)


def test_the_window_opens_once_every_replica_holds_a_share_past_a_tenth_and_closes_at_nine_tenths() -> None:
    """Scrapes before the group settles are outside; the window runs from the first settled scrape at 10 % to 90 %."""
    n = 1000
    samples = [
        sample(0.0, (0, 0), (0.0, 0.0)),
        sample(1.0, (150, 0), (1.0, 0.0)),  # one replica alone: past 10 %, not settled
        sample(2.0, (150, 0), (0.5, 0.5)),  # settled, the scrape before was not
        sample(3.0, (200, 50), (0.5, 0.5)),  # the window opens here
        sample(4.0, (400, 250), (0.5, 0.5)),
        sample(5.0, (600, 350), (0.5, 0.5)),  # 950: the window closes
        sample(6.0, (650, 360), (0.5, 0.5)),  # both still consumed after it: each had a backlog throughout
    ]
    window = scale_out.steady(samples, n, started=-1.0)
    assert window.replicas == 2 and window.window_s == 2.0 and window.window_events == 700
    assert window.events_per_s == 350 and window.per_replica_events_per_s == [200, 150]
    assert window.cpu_us_per_event == pytest.approx([1000, 1000]) and window.replica_cores == pytest.approx(0.35)
    assert window.settle_s == 3.0 and window.consumed_at_start == 0.25 and window.consumed_at_end == 0.95
    assert window.shares == [0.5, 0.5]
    assert window.broker_cores == 0.0 and not window.rebalanced_in_window and not window.cut


def test_a_pause_of_every_replica_is_inside_the_window() -> None:
    """Replicas that consume nothing for a while and then go on still had a backlog: the window is not cut."""
    counts = [0, 100, 200, 200, 200, 300, 400, 460, 500]
    samples = [sample(float(t), (c, c), (0.5, 0.5)) for t, c in enumerate(counts)]
    window = scale_out.steady(samples, 1000, started=0.0)
    assert not window.cut and window.window_s == 6.0 and window.events_per_s == 120


def test_the_window_ends_where_a_replica_consumed_nothing_after_it() -> None:
    """A replica whose partitions ran dry before 90 % ends the window at the last scrape after which it still read."""
    samples = [
        sample(0.0, (0, 0), (0.5, 0.5)),
        sample(1.0, (100, 100), (0.5, 0.5)),  # the window opens
        sample(2.0, (300, 200), (0.5, 0.5)),
        sample(3.0, (500, 210), (0.5, 0.5)),  # the second replica read its last events in the second before
        sample(4.0, (700, 210), (0.5, 0.5)),
        sample(5.0, (900, 210), (0.5, 0.5)),
    ]
    window = scale_out.steady(samples, 1000, started=0.0)
    assert window.cut and window.window_s == 1.0 and window.per_replica_events_per_s == [200, 100]
    assert window.consumed_at_end == 0.5


def test_a_group_that_never_settles_or_a_share_left_from_a_smaller_group_gives_no_window() -> None:
    """Shares adding up to more than 1 (a stale gauge) are not settled; no settled scrape before 90 %, no window."""
    stale = [sample(float(t), (100.0 * t, 100.0 * t), (1.0, 0.5)) for t in range(10)]
    assert not stale[-1].settled
    window = scale_out.steady(stale, 1000, started=0.0)
    assert window.window_s == 0 and window.events_per_s == 0 and window.settle_s is None
    late = [sample(0.0, (0, 0), (1.0, 0.0)), *(sample(1.0 + t, (950.0 + t, t), (0.5, 0.5)) for t in range(3))]
    window = scale_out.steady(late, 1000, started=0.0)  # settled only past 90 %: the tail is no steady state
    assert window.window_s == 0 and window.settle_s == 1.0 and not window.shares


def test_the_scraped_names_are_the_monitors_own_metrics() -> None:
    """parse_metrics reads the consumed counter over all topics and the group-share gauge from real /metrics text."""
    metrics = Metrics()
    metrics.consumed.labels("a").inc(5)
    metrics.consumed.labels("b").inc(2)
    metrics.group_share.set(0.25)
    assert scale_out.parse_metrics(generate_latest(metrics.registry).decode()) == (7.0, 0.25)


def test_a_replicas_environment_names_only_settings_the_monitor_knows(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every MONITOR_* variable of a replica is a setting, and the monitor reads them as meant: nothing sampled."""
    env = scale_out.replica_env("127.0.0.1:9092", "topic", "group", "chdb:///tmp/replica", 9464)
    ours = {k: v for k, v in env.items() if k.startswith("MONITOR_")}
    for key, value in ours.items():
        monkeypatch.setenv(key, value)
    settings = load_settings()  # raises on a variable that is no setting

    def read(variable: str) -> object:
        setting = SETTINGS[variable.removeprefix("MONITOR_").lower()]
        return getattr(getattr(settings, setting.slice), setting.attr)

    assert read("MONITOR_SAMPLE_RATE") == 0.0 and read("MONITOR_KAFKA_GROUP_ID") == "group"
    assert read("MONITOR_METRICS_PORT") == 9464 and read("MONITOR_KAFKA_AUTO_OFFSET_RESET") == "earliest"


@pytest.mark.long(seconds=36)
@pytest.mark.slow
def test_the_scale_out_benchmark_runs_at_a_tiny_size(
    broker: LocalBroker, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """bench/scale_out.py runs 1 and 2 replicas over a tiny backlog, each run with a settled window, as printed (4
    replicas cost the suite a minute of both cores and test nothing 2 do not)."""
    path = tmp_path / "scale_out.json"
    n = scale_out.TINY_EVENTS
    result = scale_out.main(n, rounds=1, counts=(1, 2), json_path=path, bootstrap=broker.bootstrap)
    assert json.loads(path.read_text(encoding="utf-8")) == result
    assert result["events"] == n and result["rounds"] == 1 and result["partitions"] == scale_out.PARTITIONS
    assert result["cores"] >= 1 and result["broker_measured"] is True
    assert sorted(result["replicas"]) == ["1", "2"]
    for count, figures in result["replicas"].items():
        (run,) = figures["runs"]
        replicas = int(count)
        assert figures["replicas"] == run["replicas"] == replicas
        assert len(run["shares"]) == replicas and all(s > 0 for s in run["shares"])
        assert sum(run["shares"]) == pytest.approx(1.0)
        assert len(run["per_replica_events_per_s"]) == replicas and all(r > 0 for r in run["per_replica_events_per_s"])
        assert 0 < run["window_events"] <= n and run["window_s"] > 0 and run["settle_s"] is not None
        assert scale_out.WINDOW[0] <= run["consumed_at_start"] < run["consumed_at_end"]
        assert figures["speedups_per_round"] == [figures["speedup"]] and run["broker_cores"] is not None
    assert result["replicas"]["1"]["speedup"] == 1.0
    out = capsys.readouterr().out
    assert "speed-up" in out and "efficiency" in out and "no window" not in out and str(path) in out
