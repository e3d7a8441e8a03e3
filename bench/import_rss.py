"""RSS and modules of the service right after it is built, per configuration: what each configuration loads.

Each configuration runs in a fresh interpreter (a child process), which imports what `relevancy-monitor run` imports
and builds the pipeline and the judge (no client connects: the broker and store addresses are unreachable). RSS comes
from /proc/self/statm; the modules from `sys.modules`. Prints a table and writes JSON (`--json PATH`).
Run: `python -m bench.import_rss [--tiny] [--json PATH]`."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench.output import emit

DEFAULT_JSON = Path(".relevancy-monitor/bench/import_rss.json")
WATCHED = ("anthropic", "openai", "chdb", "sqlglot", "pandas", "numpy", "pyarrow", "rich", "pygments", "google")
# (label, judge, provider, input format, store)
CONFIGURATIONS = (
    ("JSON, lexical, server URL", "lexical", "", "events", "server"),
    ("OTLP protobuf, lexical, server URL", "lexical", "", "otlp_proto", "server"),
    ("JSON, lexical, chdb:// (before the store opens)", "lexical", "", "events", "chdb"),
    ("JSON, statements, anthropic", "statements", "anthropic", "events", "server"),
    ("JSON, statements, bedrock", "statements", "bedrock", "events", "server"),
    ("JSON, statements, vertex", "statements", "vertex", "events", "server"),
    ("JSON, statements, openai", "statements", "openai", "events", "server"),
)

_CHILD = """
import asyncio, json, os, sys
page = os.sysconf("SC_PAGE_SIZE")
def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * page / 2**20
base = rss()
from monitor.runtime.logs import configure_logging
configure_logging("json", "warning")
from monitor.config import load_settings
from monitor.judges.factory import build_judge
from monitor.runtime.metrics import Metrics
from monitor.runtime.service import build_pipeline
from monitor.store.async_store import AsyncStore
imported = rss()
kw = json.loads(sys.argv[1])
async def build():
    s = load_settings(**kw)
    return build_pipeline(s, build_judge(s.judge), AsyncStore.from_settings(s.store), Metrics())
asyncio.run(build())
print(json.dumps({"python_mb": base, "after_imports_mb": imported, "built_mb": rss(), "modules": sorted(sys.modules)}))
"""


def settings_of(judge: str, provider: str, input_format: str, store: str, tmp: str) -> dict[str, Any]:
    """The settings of one configuration (addresses nobody answers: nothing connects while building)."""
    kw: dict[str, Any] = {
        "kafka_bootstrap_servers": "127.0.0.1:1", "kafka_topics": ["t"], "kafka_group_id": "g", "dlq_topic": "t.dlq",
        "clickhouse_url": f"chdb://{tmp}/store" if store == "chdb" else "http://127.0.0.1:1",
        "judge": judge, "metrics_port": 0, "input_format": input_format,
    }  # fmt: skip
    if judge != "lexical":
        kw |= {"judge_provider": provider, "judge_api_key": "not-a-key"}
        if provider != "anthropic":
            kw["judge_model"] = "judge-model"
        if provider in ("bedrock", "vertex"):
            kw["judge_region"] = "us-east-1"
        if provider == "vertex":
            kw["judge_project"] = "project"
        if provider == "openai":
            kw["judge_base_url"] = "http://127.0.0.1:1/v1"
    return kw


def measure(
    tmp: str, configurations: tuple[tuple[str, str, str, str, str], ...] = CONFIGURATIONS
) -> list[dict[str, Any]]:
    """Each configuration's RSS before the imports, after them and once built, and the watched packages loaded."""
    out = []
    for label, judge, provider, input_format, store in configurations:
        kw = settings_of(judge, provider, input_format, store, tmp)
        done = subprocess.run(
            [sys.executable, "-c", _CHILD, json.dumps(kw)], capture_output=True, text=True, check=True, timeout=120
        )
        figures = json.loads(done.stdout.strip().splitlines()[-1])
        modules = figures.pop("modules")
        tops = {m.split(".")[0] for m in modules}
        out.append(
            {"configuration": label, **figures, "modules": len(modules), "loaded": [w for w in WATCHED if w in tops]}
        )
    return out


def report_lines(rows: list[dict[str, Any]]) -> list[str]:
    """The table: RSS after the imports and once built, the module count, the watched packages loaded."""
    lines = [
        f"{'configuration':<50} {'imports MB':>10} {'built MB':>9} {'modules':>8}  loaded (of {', '.join(WATCHED)})"
    ]
    for r in rows:
        lines.append(
            f"{r['configuration']:<50} {r['after_imports_mb']:>10.1f} {r['built_mb']:>9.1f} {r['modules']:>8}"
            f"  {', '.join(r['loaded']) or '-'}"
        )
    return lines


def main(json_path: Path | None = DEFAULT_JSON, *, tiny: bool = False) -> list[dict[str, Any]]:
    """Measure every configuration (with `tiny`, the first and the OpenAI one), print the table, write the JSON."""
    chosen = (CONFIGURATIONS[0], CONFIGURATIONS[-1]) if tiny else CONFIGURATIONS
    with tempfile.TemporaryDirectory() as tmp:
        rows = measure(tmp, chosen)
    emit(report_lines(rows), {"configurations": rows}, json_path)
    return rows


if __name__ == "__main__":
    p = argparse.ArgumentParser(description="RSS and modules of the built service, per configuration.")
    p.add_argument(
        "--json", type=Path, default=DEFAULT_JSON, help=f"where to write the figures (default {DEFAULT_JSON})"
    )
    p.add_argument("--tiny", action="store_true", help="two configurations: that it runs, not what it measures (CI)")
    a = p.parse_args()
    main(a.json, tiny=a.tiny)
