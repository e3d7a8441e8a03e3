"""PauseGate: pause at the high mark, resume at the low mark, nothing in between."""

from __future__ import annotations

import pytest

from consumers.source import PauseGate


def test_hysteresis() -> None:
    """PauseGate pauses at the high mark, resumes at the low mark and reports no change in between."""
    g = PauseGate(high=10, low=5)
    assert [g.update(n) for n in (0, 9)] == [None, None]
    assert g.update(10) is True
    assert [g.update(n) for n in (12, 9, 6)] == [None, None, None]
    assert g.update(5) is False
    assert g.update(9) is None
    assert g.update(11) is True


def test_invalid_marks() -> None:
    """A PauseGate whose low mark is not below its high mark is rejected."""
    with pytest.raises(ValueError):
        PauseGate(high=5, low=5)
