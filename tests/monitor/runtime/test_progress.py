"""`run` says how it is doing: a one-line progress summary at info, every `progress_log_s`."""

from __future__ import annotations

from collections.abc import Callable

from structlog.testing import capture_logs

from monitor.config import Settings
from monitor.devtools.localbroker import LocalBroker
from monitor.store.async_store import AsyncStore
from tests.conftest import EXAMPLES
from tests.harness import RunningPipeline, produce_values, wait_for

FLAT = (EXAMPLES / "events-flat.jsonl").read_bytes().splitlines()
FIELDS = {
    "consumed",
    "judged",
    "written",
    "dead_lettered",
    "in_flight",
    "lag",
    "sampling_factor",
    "circuit",
    "ready",
    "down",
}


async def test_progress_lines_report_consumed_judged_written_dead_lettered_lag_rate_and_circuit(
    broker: LocalBroker, make_settings: Callable[..., Settings], async_store: AsyncStore
) -> None:
    """While running, a `progress` line at info carries every counter, the lag, the sampling factor and the circuit."""
    settings = make_settings(progress_log_s=0.5, lag_check_s=0.2)
    await produce_values(broker.bootstrap, settings.kafka.topics[0], [*FLAT, b"not json"])
    with capture_logs() as logs:
        async with RunningPipeline(settings, async_store) as run:

            async def reported_all() -> bool:
                lines = [e for e in logs if e["event"] == "progress"]
                return bool(lines) and lines[-1]["written"] == len(FLAT) and lines[-1]["dead_lettered"] == 1

            await wait_for(reported_all, 30, "a progress line counting every event")
            assert run.pipeline.flow.progress_log_s == 0.5
    last = [e for e in logs if e["event"] == "progress"][-1]
    assert FIELDS <= set(last) and last["log_level"] == "info"
    assert (last["consumed"], last["judged"], last["circuit"], last["ready"]) == (
        len(FLAT) + 1,
        len(FLAT),
        "closed",
        True,
    )
