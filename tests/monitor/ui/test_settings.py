"""The UI's settings slice: MONITOR_UI_* read by `ui` alone, checked there, and ignored by the monitor's own."""

from __future__ import annotations

import pytest

from monitor.config import load_settings
from monitor.ui.settings import load_ui_settings
from schemas.errors import ConfigError


def test_ui_variables_are_the_ui_slices_and_no_unknown_monitor_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    """With MONITOR_UI_USER_HEADER and MONITOR_UI_SECRET set (as a deployment sets them), the monitor's settings
    load, and the UI's slice reads them, the secret hidden; the defaults bind loopback on 8787."""
    assert (load_ui_settings().host, load_ui_settings().port, load_ui_settings().user_header) == (
        "127.0.0.1",
        8787,
        None,
    )
    monkeypatch.setenv("MONITOR_UI_USER_HEADER", "X-Forwarded-Email")
    monkeypatch.setenv("MONITOR_UI_SECRET", "s3cr3t-value")
    load_settings()
    ui = load_ui_settings(port=0)
    assert (ui.user_header, ui.port) == ("X-Forwarded-Email", 0)
    assert "s3cr3t-value" not in repr(ui) and ui.secret is not None
    assert ui.secret.get_secret_value() == "s3cr3t-value"


def test_a_misspelt_or_bad_ui_variable_is_one_line_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """A MONITOR_UI_ variable that is no setting, or a value that is not one, is refused naming the variable."""
    monkeypatch.setenv("MONITOR_UI_PROT", "1")
    with pytest.raises(ConfigError, match=r"unknown setting MONITOR_UI_PROT \(did you mean MONITOR_UI_PORT\?\)"):
        load_ui_settings()
    monkeypatch.delenv("MONITOR_UI_PROT")
    monkeypatch.setenv("MONITOR_UI_USER_HEADER", "X Forwarded: Email")
    with pytest.raises(ConfigError, match="MONITOR_UI_USER_HEADER"):
        load_ui_settings()
