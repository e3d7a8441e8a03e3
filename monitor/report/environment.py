"""The Jinja2 environment over the package's templates (`monitor/report/templates/`): the report's page, and the
partials and CSS a web page of the project can share with it.

Every `{{ value }}` is escaped (autoescape is on for every template here: each is HTML, or CSS inlined into it), so
stored text (app names, conversations, verdicts, errors) is text on the page whatever it holds; only `Markup` passes
as it is, and the report has one source of it: the SVG charts it draws (`monitor.report.svg.render_svg`). An unknown
name in a template is an error, not an empty string (`StrictUndefined`)."""

from __future__ import annotations

from functools import cache

from jinja2 import Environment, PackageLoader, StrictUndefined

from monitor.report.formats import count, num, pct, seconds, segment, signed, usd, when
from monitor.report.totals import ratio

TEMPLATES = "templates"  # the folder inside `monitor.report`, shipped as package data

_FILTERS = {
    "when": when,
    "num": num,
    "pct": pct,
    "usd": usd,
    "thousands": count,  # not `count`: Jinja2's own `count` is the length of a sequence
    "signed": signed,
    "seconds": seconds,
    "segment": segment,
}


@cache
def environment() -> Environment:
    """The environment (built once): templates read through importlib.resources, autoescape on, strict names."""
    env = Environment(
        loader=PackageLoader("monitor.report", TEMPLATES),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,  # a line of only a block tag leaves no blank line in the page
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters.update(_FILTERS)
    env.globals["ratio"] = ratio  # a share of a whole, None when the whole is 0
    return env
