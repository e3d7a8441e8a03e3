"""Run every benchmark in turn (`make bench`)."""

from __future__ import annotations

import asyncio
import subprocess
import sys

from bench import (
    alert_quality,
    import_rss,
    judge_overhead,
    judge_overhead_openai,
    memory_backlog,
    peer_deepeval,
    pipeline_throughput,
    prompt_cache,
    redaction_quality,
    round_time,
    scale_out,
)


def main() -> None:
    """Each benchmark prints its own ratios against a baseline measured in the same run."""
    judge_overhead.main()
    judge_overhead_openai.main()  # the same at the OpenAI-compatible provider (issue 41)
    prompt_cache.main(500)
    asyncio.run(pipeline_throughput.main(20_000))
    redaction_quality.main()
    alert_quality.main()  # in memory: the shipped rules' rounds over synthetic streams, no store
    round_time.main()  # one round of 500 detector segments, in memory
    # In a process of its own: chDB opens one store directory per process, and pipeline_throughput has had its own.
    subprocess.run([sys.executable, "-m", "bench.backtest_speed"], check=True)
    subprocess.run([sys.executable, "-m", "bench.latency"], check=True)  # chDB in this process too: one of its own
    subprocess.run([sys.executable, "-m", "bench.ui_pages"], check=True)  # the UI's pages on a 10M-row chDB store
    import_rss.main()  # each configuration in a fresh interpreter
    memory_backlog.main()  # its monitor runs in a child process of its own
    scale_out.main()  # its replicas are `relevancy-monitor run` processes, each on a chDB store of its own
    # DeepEval needs its bench venv (created on first use); without it (offline, say) one line says why, and on.
    try:
        peer_deepeval.peer_python()
    except peer_deepeval.PeerUnavailable as e:
        print(f"peer_deepeval skipped: {e}")
    else:
        peer_deepeval.main()


if __name__ == "__main__":
    main()
