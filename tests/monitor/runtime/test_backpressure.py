"""The backpressure decision: pause above the high mark or while the circuit is open, resume only when both clear."""

from __future__ import annotations

from monitor.runtime.backpressure import IN_FLIGHT_CAP, JUDGE_CIRCUIT_OPEN, Backpressure


def test_pauses_at_the_cap_and_resumes_only_at_the_low_mark() -> None:
    """Reaching the cap pauses once and asks for a flush; nothing changes until in-flight falls to the low mark."""
    bp = Backpressure(high=10, low=4)
    assert bp.update(9, circuit_open=False).pause is None
    change = bp.update(10, circuit_open=False)
    assert (change.pause, change.reasons, change.flush_now) == (True, frozenset({IN_FLIGHT_CAP}), True)
    assert [bp.update(n, circuit_open=False).pause for n in (12, 7, 5)] == [None, None, None]
    assert bp.update(4, circuit_open=False).pause is False


def test_an_open_circuit_pauses_and_keeps_paused_until_both_reasons_clear() -> None:
    """The circuit and the cap each hold the pause; resuming needs both cleared, and no reason toggles it twice."""
    bp = Backpressure(high=10, low=4)
    change = bp.update(0, circuit_open=True)
    assert (change.pause, change.reasons, change.flush_now) == (True, frozenset({JUDGE_CIRCUIT_OPEN}), False)
    assert bp.update(10, circuit_open=True).pause is None  # already paused: the cap only adds a reason
    assert bp.update(10, circuit_open=False).reasons == frozenset({IN_FLIGHT_CAP})
    assert bp.update(10, circuit_open=False).pause is None
    assert bp.update(3, circuit_open=False).pause is False
