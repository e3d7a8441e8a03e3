"""What the service does about memory as it starts: glibc's thresholds pinned before anything is built
(`monitor.runtime.heap_trim.pin_malloc_thresholds`), and what start-up built moved out of the cyclic collector's
generations once the pipeline is built (`monitor.runtime.service.freeze_start_up`), collectable again when it ends."""

from __future__ import annotations

import asyncio
import gc
from typing import Any

import pytest

from monitor.config import load_settings
from monitor.runtime import service
from monitor.store.async_store import AsyncStore


class _Store:
    async def open(self) -> None:
        return None

    async def close(self) -> None:
        return None


class _Pipeline:
    def __init__(self, frozen_when: dict[str, int]) -> None:
        self.frozen_when = frozen_when

    async def run(self, stop: asyncio.Event) -> None:
        self.frozen_when["running"] = gc.get_freeze_count()


async def _run_service(monkeypatch: pytest.MonkeyPatch, frozen_when: dict[str, int], events: list[str]) -> None:
    """`run_service` with the pipeline, the store and the topic check stood in for: nothing connects."""

    def build(*args: Any) -> _Pipeline:
        frozen_when["building"] = gc.get_freeze_count()
        events.append("built")
        return _Pipeline(frozen_when)

    async def no_topics(*args: Any) -> list[str]:
        return []

    def pin() -> bool:
        events.append("pinned")
        return True

    monkeypatch.setattr(service, "build_pipeline", build)
    monkeypatch.setattr(service, "ensure_dlq_topic", no_topics)
    monkeypatch.setattr(service, "pin_malloc_thresholds", pin)
    monkeypatch.setattr(AsyncStore, "from_settings", lambda *args: _Store())
    settings = load_settings(
        kafka_bootstrap_servers="127.0.0.1:1", kafka_topics=["conversations"], kafka_group_id="start-up",
        dlq_topic="conversations.dlq", clickhouse_url="http://127.0.0.1:1", judge="lexical", metrics_port=0,
    )  # fmt: skip
    await service.run_service(settings, stop=asyncio.Event())


async def test_the_service_freezes_start_up_after_building_the_pipeline(monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing is frozen while the pipeline is built; it runs with start-up's objects frozen; once the service has
    ended they are back in the collector's care."""
    frozen_when: dict[str, int] = {}
    gc.unfreeze()
    try:
        await _run_service(monkeypatch, frozen_when, [])
        assert frozen_when["building"] == 0 and frozen_when["running"] > 0
        assert gc.get_freeze_count() == 0
    finally:
        gc.unfreeze()


async def test_the_service_pins_glibcs_thresholds_before_building_anything(monkeypatch: pytest.MonkeyPatch) -> None:
    """glibc's thresholds are pinned once, before the pipeline (and the buffers of its clients) is built."""
    events: list[str] = []
    await _run_service(monkeypatch, {}, events)
    assert events == ["pinned", "built"]
