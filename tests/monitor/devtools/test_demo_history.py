"""The demo's history is judged through the service's guards, as live traffic is."""

from __future__ import annotations

import random

from monitor.config import load_settings
from monitor.devtools.demo_history import judge_history
from monitor.devtools.traffic import generate_events
from tests.fake_messages_api import FakeMessagesAPI, overloaded


async def test_a_transient_overload_while_judging_the_history_is_ridden_out(fake_messages_api: FakeMessagesAPI) -> None:
    """An overload past the client's own retries is judged again by the guard: every history row has a score."""
    fake_messages_api.script(overloaded(), overloaded())
    settings = load_settings(
        judge="rubric", judge_max_retries=0, judge_concurrency=1, **fake_messages_api.settings_overrides()
    )
    history = await judge_history(settings, list(generate_events(4, seed=3, malformed_share=0.0)), random.Random(1))
    assert len(history.rows) == 4 and all(r.status == "ok" for r in history.rows), [r.error for r in history.rows]
    assert len(fake_messages_api.message_requests) == 6
