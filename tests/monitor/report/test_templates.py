"""The report's templates: found through importlib.resources, listed as package data (so the wheel carries every
one), autoescaped and strict about names."""

from __future__ import annotations

import importlib.resources
import tomllib
from pathlib import Path

import jinja2
import pytest
from markupsafe import Markup

from monitor.report.environment import TEMPLATES, environment

ROOT = Path(__file__).resolve().parents[3]
FOLDER = ROOT / "monitor" / "report" / TEMPLATES


def test_templates_and_css_are_found_through_importlib_resources() -> None:
    """The page, the shared partials and the CSS are resources of `monitor.report`, and the loader reads them."""
    folder = importlib.resources.files("monitor.report") / TEMPLATES
    for name in ("report.html.j2", "base.css", "partials/table.html.j2", "partials/kpi.html.j2"):
        assert (folder / name).is_file(), name
    assert ".kpi" in (folder / "base.css").read_text(encoding="utf-8")
    assert set(environment().list_templates()) >= {"report.html.j2", "base.css", "partials/chart.html.j2"}


def test_the_package_data_globs_list_every_template() -> None:
    """`[tool.setuptools.package-data]` of monitor.report matches every file of the templates folder (a template
    the globs miss would be absent from the wheel, and the installed report would fail)."""
    globs = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]["package-data"]
    base = ROOT / "monitor" / "report"
    listed = {p for pattern in globs.get("monitor.report", []) for p in base.glob(pattern)}
    files = {p for p in FOLDER.rglob("*") if p.is_file() and "__pycache__" not in p.parts}
    assert files and files <= listed, sorted(str(p.relative_to(base)) for p in files - listed)


def test_the_environment_escapes_and_refuses_unknown_names() -> None:
    """Every `{{ value }}` is escaped, Markup passes as it is, and a misspelt name is an error, not an empty cell."""
    template = environment().from_string("<p>{{ x }}{{ m }}</p>")
    html = template.render(x="<script>alert(1)</script>", m=Markup("<b>ok</b>"))
    assert html == "<p>&lt;script&gt;alert(1)&lt;/script&gt;<b>ok</b></p>"
    with pytest.raises(jinja2.UndefinedError):
        environment().from_string("{{ missing }}").render()
