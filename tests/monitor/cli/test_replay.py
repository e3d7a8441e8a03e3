"""`relevancy-monitor replay` as a user runs it: the estimate first, the refusal without --yes, the cap's exit code
and its resume command, the summary."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from monitor.devtools.localbroker import LocalBroker
from tests.fake_messages_api import FakeMessagesAPI, Reply
from tests.harness import cli, monitor_env, produce_values
from tests.monitor.replay.conftest import events, minutes_ago, ms

DOLLAR = Reply(
    usage={
        "input_tokens": 10_000_000,
        "output_tokens": 0,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
    }
)


@pytest.mark.long(seconds=157)
async def test_replay_shows_the_estimate_refuses_without_yes_and_stops_at_the_cap(
    broker: LocalBroker, topic: str, tmp_path: Path, fake_messages_api: FakeMessagesAPI
) -> None:
    """A dry run prints the count and estimate and exits 0; above the threshold it exits 2 naming --yes; with a cap it
    exits 3 after the estimate and the progress, printing what it scored and the command that resumes it."""
    at = minutes_ago(10)
    await produce_values(broker.bootstrap, topic, events(6, "c", at), timestamp_ms=ms(at))
    env = monitor_env(
        MONITOR_KAFKA_BOOTSTRAP_SERVERS=broker.bootstrap,
        MONITOR_KAFKA_TOPICS=topic,
        MONITOR_CLICKHOUSE_URL=f"chdb://{tmp_path / 'store'}",
        MONITOR_JUDGE="rubric",
        MONITOR_JUDGE_CONCURRENCY="1",
        **fake_messages_api.env(),
    )
    since, until = (
        f"--since={(at - timedelta(minutes=1)).isoformat()}",
        f"--until={(at + timedelta(minutes=1)).isoformat()}",
    )

    code, out, err = await cli("replay", since, until, "--dry-run", env=env)  # a dry run only reads: no store, no run
    assert (
        code != 0
        and err.strip().startswith("relevancy-monitor: error: no embedded ClickHouse store at")
        and len(err.strip().splitlines()) == 1
    )
    assert not (tmp_path / "store").exists()
    assert (await cli("migrate", env=env))[0] == 0

    code, out, err = await cli("replay", since, until, "--dry-run", env=env)
    assert code == 0, err
    assert "read      6 events in the range" in out
    assert "to score  6 events: 6 judge calls" in out
    assert "estimate  $0.00" in out
    assert "dry run: nothing judged" in out
    assert fake_messages_api.message_requests == []
    # Pricing a backfill needs no key: the same estimate without one
    keyless = {k: v for k, v in env.items() if k not in ("MONITOR_ANTHROPIC_API_KEY", "ANTHROPIC_API_KEY")}
    code, keyless_out, err = await cli("replay", since, until, "--dry-run", env=keyless)
    assert code == 0, err
    assert "estimate  $0.00" in keyless_out and "to score  6 events: 6 judge calls" in keyless_out
    assert fake_messages_api.message_requests == []

    code, out, err = await cli("replay", since, until, "--replay-confirm-usd", "0", env=env)
    assert code == 2
    assert "estimate  $" in out
    assert err.strip().splitlines()[-1].startswith("relevancy-monitor: error: the estimated cost is $0.0")
    assert "run again with --yes" in err

    fake_messages_api.always(DOLLAR)
    code, out, err = await cli("replay", since, until, "--max-usd", "2.5", "--progress", "lines", env=env)
    assert code == 3, err
    assert "stopped at the cap: 2 rows scored, 0 failed, of 6 to score; spent $2.00" in out
    assert "scoring:" in err
    resume = next(line for line in out.splitlines() if line.startswith("resume"))
    assert "--resume" in resume and "--max-usd 2.5" in resume

    code, out, err = await cli(*resume.split()[2:], "--yes", env=env)
    assert code == 3, err
    assert "already scored by this judge" in out
