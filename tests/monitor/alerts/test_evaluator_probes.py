"""The alert evaluator's probes: /readyz once a round reached the store, 503 when the store fails, /healthz while
rounds keep beating."""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
from datetime import timedelta

from monitor.alerts.engine import AlertRunner
from monitor.devtools.localbroker import free_port
from monitor.store.connection import ClickHouseStore
from schemas.errors import StoreError
from tests.monitor.alerts.conftest import rules_from

RULES = """
rules:
  - name: floor
    metric: mean_score
    condition: {threshold: 0.4}
"""


def _get(port: int, path: str) -> tuple[int, dict[str, object]]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=2) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())
    except OSError:
        return 0, {}


def _until(predicate: object, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return True
        time.sleep(0.05)
    return False


def test_the_evaluator_is_ready_after_a_round_and_unready_while_the_store_fails(store: ClickHouseStore) -> None:
    """/readyz turns 200 after a round reached the store and 503 naming the store when rounds fail; /healthz stays
    200."""
    from monitor.alerts.rules import RuleSet

    runner = AlertRunner(store, RuleSet(rules=rules_from(RULES)), [])
    port, stop = free_port(), threading.Event()
    thread = threading.Thread(target=runner.run_forever, args=(timedelta(seconds=1), stop, port), daemon=True)
    thread.start()
    try:
        assert _until(lambda: _get(port, "/readyz")[0] == 200, 20)
        original = runner.run_once

        def failing(now: object = None) -> object:
            raise StoreError("ClickHouse answered 516: authentication failed")

        runner.run_once = failing  # type: ignore[method-assign,assignment]
        assert _until(lambda: _get(port, "/readyz")[0] == 503, 10)
        _, report = _get(port, "/readyz")
        assert "authentication failed" in report["components"]["store"]["reason"]  # type: ignore[index]
        assert _get(port, "/healthz")[0] == 200
        runner.run_once = original  # type: ignore[method-assign]
        assert _until(lambda: _get(port, "/readyz")[0] == 200, 10)
    finally:
        stop.set()
        thread.join(timeout=10)
