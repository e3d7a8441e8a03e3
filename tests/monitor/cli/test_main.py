"""The console script as a user runs it: separate processes for producing, the service and SQL."""

from __future__ import annotations

import asyncio
import json
import signal
from pathlib import Path

import pytest

from monitor.devtools.localbroker import LocalBroker
from tests.conftest import EXAMPLES
from tests.harness import CLI, cli, committed_offsets, monitor_env, wait_for


@pytest.mark.long(seconds=28)
async def test_run_scores_events_from_another_process_and_sql_shows_them(
    broker: LocalBroker, topic: str, tmp_path: Path
) -> None:
    """`run` scores events another process produced, exits 0 on SIGTERM without logging text; `sql` shows them."""
    env = monitor_env(
        MONITOR_KAFKA_BOOTSTRAP_SERVERS=broker.bootstrap,
        MONITOR_KAFKA_TOPICS=topic,
        MONITOR_KAFKA_GROUP_ID=f"cli-{topic}",
        MONITOR_DLQ_TOPIC=f"{topic}.dlq",
        MONITOR_CLICKHOUSE_URL=f"chdb://{tmp_path / 'ch'}",
        MONITOR_METRICS_PORT="0",
        MONITOR_BATCH_MAX_SECONDS="0.2",
        MONITOR_COMMIT_INTERVAL_S="0.2",
    )
    for f in ("events-flat.jsonl", "events-chat.jsonl", "events-malformed.txt"):
        code, _, err = await cli(
            "produce",
            "--file",
            str(EXAMPLES / f),
            "--kafka-bootstrap-servers",
            broker.bootstrap,
            "--kafka-topic",
            topic,
            env=env,
        )
        assert code == 0, err
    service = await asyncio.create_subprocess_exec(
        CLI, "run", env=env, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE
    )
    try:

        async def all_committed() -> bool:
            return (
                sum(v or 0 for v in (await committed_offsets(broker.bootstrap, f"cli-{topic}", topic)).values()) == 11
            )

        await wait_for(all_committed, 60, "11 offsets committed by the service")
        service.send_signal(signal.SIGTERM)
        _, err_bytes = await asyncio.wait_for(service.communicate(), 30)
    finally:
        if service.returncode is None:
            service.kill()
    assert service.returncode == 0
    logs = [json.loads(line) for line in err_bytes.decode().splitlines() if line.startswith("{")]
    assert any(entry["event"] == "stopped" and entry["unfinished_events"] == 0 for entry in logs)
    assert sum(entry["event"] == "dead_lettered" for entry in logs) == 5
    assert not any("Order A17 shipped" in json.dumps(entry) for entry in logs)  # no conversation text in info logs

    code, out, err = await cli(
        "sql", "--format", "json", "SELECT event_id, round(score, 3) AS s FROM {table} FINAL ORDER BY event_id", env=env
    )
    assert code == 0, err
    rows = {r["event_id"]: r["s"] for r in map(json.loads, out.splitlines())}
    assert len(rows) == 6
    assert rows["9f1c2a70-0001-4c1e-9a53-000000000001"] == 1.0 and rows["9f1c2a70-0002-4c1e-9a53-000000000002"] == 0.333

    code, out, _ = await cli("sql", "--format", "csv", "SELECT count() AS n FROM {table}", env=env)
    assert code == 0 and out.splitlines() == ["n", "6"]


async def test_bad_setting_is_one_line_naming_it() -> None:
    """An invalid setting exits 2 with one line naming it; a DLQ topic among the inputs exits 2 too."""
    code, _out, err = await cli("run", env=monitor_env(MONITOR_SAMPLE_RATE="2"))
    assert code == 2
    assert err.strip().count("\n") == 0 and "MONITOR_SAMPLE_RATE" in err and "Traceback" not in err
    code, _, err = await cli("run", "--kafka-topics", "a,b", "--dlq-topic", "a", env=monitor_env())
    assert code == 2 and "invalid setting MONITOR_DLQ_TOPIC" in err


async def test_llm_judge_without_key_refuses_to_start() -> None:
    """`run` with an LLM judge and no API key exits 2 naming ANTHROPIC_API_KEY, without a traceback."""
    code, _, err = await cli("run", "--judge", "rubric", env=monitor_env())
    assert code == 2 and "ANTHROPIC_API_KEY" in err and "Traceback" not in err


async def test_unreachable_kafka_is_one_line(tmp_path: Path) -> None:
    """Unreachable Kafka exits 1, the last stderr line naming MONITOR_KAFKA_BOOTSTRAP_SERVERS."""
    env = monitor_env(
        MONITOR_KAFKA_BOOTSTRAP_SERVERS="127.0.0.1:1",
        MONITOR_CLICKHOUSE_URL=f"chdb://{tmp_path}",
        MONITOR_METRICS_PORT="0",
    )
    code, _, err = await cli("run", env=env)
    assert code == 1
    last = err.strip().splitlines()[-1]
    assert last.startswith("relevancy-monitor: error: cannot reach Kafka") and "MONITOR_KAFKA_BOOTSTRAP_SERVERS" in last


async def test_sql_errors_are_one_line(tmp_path: Path) -> None:
    """A failing query exits 1 with an error line and no traceback; no query at all exits 2."""
    env = monitor_env(MONITOR_CLICKHOUSE_URL=f"chdb://{tmp_path}")
    code, _, err = await cli("sql", "SELECT nope FROM {table}", env=env)
    assert code == 1 and "Traceback" not in err and err.startswith("relevancy-monitor: error:")
    code, _, err = await cli("sql", env=env)
    assert code == 2 and "give a query" in err


async def test_produce_generates_personal_data_on_request_and_refuses_a_bad_share(
    broker: LocalBroker, topic: str
) -> None:
    """`produce --generate N --pii-share 1` sends events whose text the redactor finds items in; a share outside
    0..1 or a negative rate is a usage error in one line (exit 2)."""
    from monitor.privacy.redactor import build_redactor
    from monitor.privacy.settings import RedactionSettings
    from tests.harness import read_all

    env = monitor_env()
    code, _, err = await cli(
        "produce", "--generate", "5", "--pii-share", "1.5", "--kafka-bootstrap-servers", broker.bootstrap, env=env
    )
    assert (code, len(err.strip().splitlines())) == (2, 1) and "--pii-share" in err, err
    code, _, err = await cli(
        "produce", "--generate", "5", "--rate", "-1", "--kafka-bootstrap-servers", broker.bootstrap, env=env
    )
    assert (code, len(err.strip().splitlines())) == (2, 1) and "--rate must be 0" in err, err
    args = (
        "--generate",
        "30",
        "--pii-share",
        "1",
        "--malformed-share",
        "0",
        "--kafka-bootstrap-servers",
        broker.bootstrap,
        "--kafka-topic",
        topic,
    )
    code, _, err = await cli("produce", *args, env=env)
    assert code == 0, err
    redactor = build_redactor(RedactionSettings())
    records = await read_all(broker.bootstrap, topic, 30)
    assert all(redactor.redact(r.value.decode()).counts for r in records)


async def test_a_closed_pipe_ends_quietly(tmp_path: Path) -> None:
    """`relevancy-monitor judge ... | head -1` ends without a traceback when the reader stops reading."""
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text(
        "".join(json.dumps({"question": f"What is {i}?", "answer": f"It is {i}."}) + "\n" for i in range(5000))
    )
    proc = await asyncio.create_subprocess_shell(
        f"'{CLI}' judge --judge lexical --file '{pairs}' --format json | head -1",
        env=monitor_env(),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert len(out.decode().splitlines()) == 1
    assert "Traceback" not in err.decode() and "BrokenPipe" not in err.decode(), err.decode()


def test_version_prints_the_installed_version(capsys: pytest.CaptureFixture[str]) -> None:
    """`relevancy-monitor --version` prints the distribution's version and exits 0."""
    from importlib.metadata import version

    from monitor.cli.main import main

    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.strip() == f"relevancy-monitor {version('relevancy-monitor')}"


@pytest.mark.parametrize(
    ("argv", "wanted"),
    [
        (
            ["run", "--judge-concurency", "3"],
            "unrecognized arguments: --judge-concurency 3; did you mean --judge-concurrency?",
        ),
        (["alerts", "run", "--interval", "-1m"], "a value that starts with '-' is written --interval=VALUE"),
    ],
)
def test_a_bad_argument_is_one_line_with_a_hint(
    argv: list[str], wanted: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A misspelt option gets a did-you-mean from every subcommand's options, and a value starting with '-' the form
    it needs, each in one line with exit 2, not a page of usage (`alerts run --interval -1m` printed 17 lines)."""
    from monitor.cli.main import main

    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    lines = capsys.readouterr().err.strip().splitlines()
    assert exit_info.value.code == 2 and len(lines) == 1 and wanted in lines[0], lines
