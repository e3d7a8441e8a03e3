"""The RE2 gates: one pass says which recognizers a text can need; prose that meets no condition runs none."""

from __future__ import annotations

import pytest

from monitor.privacy import recognizers
from monitor.privacy.gates import Gates
from monitor.privacy.recognizers import BuiltinRecognizers


def test_gates_name_every_condition_met_case_insensitively() -> None:
    """Every condition met anywhere in the text is named once, whatever the case; none met gives an empty set."""
    gates = Gates([("key", "sk-"), ("key", "akia"), ("mail", "@"), ("run", r"\d{6}")])
    assert gates.open("AKIA... and a@b") == {"key", "mail"}
    assert gates.open("order 123456") == {"run"}
    assert gates.open("When did order A17 ship?") == frozenset()


def test_prose_without_any_condition_runs_no_recognizer(monkeypatch: pytest.MonkeyPatch) -> None:
    """A text that opens no gate never reaches a pattern or validator (they would raise here); one that does is
    scanned."""
    builtin = BuiltinRecognizers(("US",))

    def refuse(*args: object) -> None:
        raise AssertionError("a recognizer ran behind a closed gate")

    monkeypatch.setattr(recognizers.ValidatedPattern, "scan", refuse)
    monkeypatch.setattr(recognizers.PhoneRecognizer, "find", refuse)
    assert list(builtin.find("Thanks for getting in touch. Order A17 shipped on 3 March; HTTP 404.")) == []
    with pytest.raises(AssertionError, match="closed gate"):
        list(builtin.find("mail me at a@b.io"))
