"""`relevancy-monitor demo`: the whole path on this machine, ending with the alert it fired and a report."""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from monitor.store.settings import DEFAULT_CLICKHOUSE_URL
from monitor.store.urls import chdb_directory, normalize_url, redact_url
from schemas.errors import UsageError

if TYPE_CHECKING:
    from rich.console import Console

    from monitor.devtools.demo import DemoPlan, DemoProgress


def demo_directory(flag: str | None, env: Mapping[str, str]) -> Path:
    """The embedded store's directory: the flag, else MONITOR_CLICKHOUSE_URL when embedded, else the default store.
    Raises `UsageError` for a server or in-memory URL given as the flag: the demo replaces its store."""
    configured = env.get("MONITOR_CLICKHOUSE_URL", "")
    url = flag or (configured if configured.startswith("chdb:") else DEFAULT_CLICKHOUSE_URL)
    directory = chdb_directory(url)
    if directory is None:
        raise UsageError(
            f"--clickhouse-url: the demo runs on an embedded store of its own (chdb:///dir), got {redact_url(url)!r}"
        )
    return directory


def register(sub: Any) -> None:
    """Add `demo` to the CLI's subparsers."""
    p = sub.add_parser(
        "demo",
        help="a local broker, the monitor and the alert evaluator on generated traffic, until a planted regression "
        "alerts",
        description="Six hours of history, then live traffic in which one app's new prompt version pads its answers: "
        "the "
        "demo ends with the alert that fired, the worst examples, an HTML report and three commands to try. It uses "
        "the statements LLM judge, with less traffic, when one is configured (ANTHROPIC_API_KEY, or "
        "MONITOR_JUDGE_PROVIDER with its settings), the lexical heuristic otherwise.",
    )
    p.add_argument(
        "--duration",
        type=float,
        default=120.0,
        metavar="SECONDS",
        help="most seconds of live traffic; it stops 5 s after the planted alert fires (default: 120)",
    )
    p.add_argument(
        "--rate",
        type=float,
        default=40.0,
        metavar="PER_SECOND",
        help="live events per second (default: 40; at most 4 with an LLM judge)",
    )
    p.add_argument(
        "--clickhouse-url",
        default=None,
        metavar="URL",
        help="the embedded store (chdb:///dir), replaced if an earlier demo wrote it [env MONITOR_CLICKHOUSE_URL if "
        "chdb:; "
        "default: the store `run` and `sql` use, chdb://<cwd>/.relevancy-monitor/chdb]",
    )
    p.add_argument(
        "--report",
        type=Path,
        metavar="FILE",
        default=Path(".relevancy-monitor/demo-report.html"),
        help="the HTML report (default: %(default)s)",
    )
    p.add_argument(
        "--format",
        choices=("events", "otlp_proto", "otlp_json"),
        default="events",
        help="the live traffic as the monitor's JSON events, or as an OpenTelemetry Collector's records of GenAI "
        "spans (otlp_proto, otlp_json; 10 calls to a record, in the four dialects), read with MONITOR_INPUT_FORMAT "
        "(default: events)",
    )
    p.set_defaults(func=cmd_demo)


def cmd_demo(ns: argparse.Namespace) -> int:
    """`demo`: plan it from the flags and the environment, run it with a live panel, print the final screen."""
    from rich.console import Console

    from monitor.devtools.demo import plan_demo, run_demo
    from monitor.devtools.demo_screen import final_lines, next_commands, ui_lines

    console = Console(stderr=True)
    plan = plan_demo(
        ns.duration, ns.rate, demo_directory(ns.clickhouse_url, os.environ), ns.report, os.environ, ns.format
    )
    console.print(
        f"[bold]relevancy-monitor demo[/]: {plan.history_events} events of history over {plan.history_hours:g} h, then "
        f"{plan.rate:g} events/s until the alert fires (at most {plan.duration_s:g} s); store chdb://{plan.data_dir}",
        soft_wrap=True,
    )
    outcome = _run_with_panel(plan, console, run_demo)
    for line in final_lines(outcome, _store_flag(plan)):
        console.print(line, highlight=False)
    for command in next_commands(outcome, _cli_name(), _store_flag(plan)):
        console.print(
            f"  {command}", soft_wrap=True, highlight=False, markup=False
        )  # one line to copy, however it wraps
    for line in ui_lines([r.state for r in outcome.fired], _cli_name(), _store_flag(plan)):
        console.print(line, soft_wrap=True, highlight=False, markup=False)
    return 0


def _run_with_panel(plan: DemoPlan, console: Console, run: Any) -> Any:
    """The demo with a live panel on a terminal, or a line every few seconds elsewhere (CI logs, pipes)."""
    from rich.live import Live

    from monitor.devtools.demo_screen import live_view

    told = 0  # lines of the story already printed

    def tell(p: DemoProgress, out: Console) -> None:
        nonlocal told
        for event in p.story[told:]:
            out.print(event, soft_wrap=True, highlight=False, markup=False, style="bold")
        told = len(p.story)

    if console.is_terminal:
        with Live(console=console, refresh_per_second=4, transient=True) as live:

            def panel(p: DemoProgress) -> None:
                tell(p, live.console)  # printed above the panel, where it stays when the panel goes
                live.update(live_view(p, plan))

            return run(plan, panel)
    last: dict[str, Any] = {"at": 0.0, "phase": ""}

    def line(p: DemoProgress) -> None:
        tell(p, console)
        if p.phase != last["phase"] or time.monotonic() - last["at"] >= 5:
            last.update(at=time.monotonic(), phase=p.phase)
            counts = (
                f"consumed {p.consumed}{plan.consumed_unit}, judged {p.judged}, in flight {p.in_flight}, "
                f"dead-lettered {p.dead_lettered}"
            )
            text = f"{p.phase}: {counts}" if p.counting else p.phase
            console.print(text, soft_wrap=True)

    return run(plan, line)


def _cli_name() -> str:
    """How to call this command again: `relevancy-monitor` when it is on PATH, else its path (`make demo` runs it
    from .venv/bin without activating the venv)."""
    own = Path(sys.argv[0]).absolute()
    on_path = shutil.which("relevancy-monitor")
    if on_path and Path(on_path).absolute() == own:
        return "relevancy-monitor"
    try:
        return str(own.relative_to(Path.cwd()))
    except ValueError:
        return str(own)


def _store_flag(plan: DemoPlan) -> str:
    """` --clickhouse-url …` when `sql` and `alerts` would not find the demo's store by default."""
    configured = normalize_url(os.environ.get("MONITOR_CLICKHOUSE_URL") or DEFAULT_CLICKHOUSE_URL)
    return "" if chdb_directory(configured) == plan.data_dir else f" --clickhouse-url chdb://{plan.data_dir}"
