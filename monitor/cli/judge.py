"""`relevancy-monitor judge`: judge question/answer pairs once and show why they scored as they did.

No Kafka, no store: settings from the environment (MONITOR_*), pairs from flags or a JSONL file. A line of the file
may also give the conversation before the question (`context`) and the assistant's instructions (`system`), in the
shape of the labelled sets' multi-turn cases; the judge reads them cut to the configured context window, as the
service would send them."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

from monitor.calibration.labels import parse_context, parse_system
from monitor.calibration.run import offline_event
from monitor.cli.flags import JUDGE_ENV_ONLY, JUDGE_SETTINGS, add_renamed_flag, add_setting_flags, settings_from_args
from monitor.config import Settings
from monitor.judges.base import Judge, JudgeFailure, JudgeInfo, Judgement
from monitor.judges.context_window import ContextWindow
from monitor.judging.guarded_judge import GuardedJudge
from monitor.judging.metrics import JudgingMetrics
from monitor.judging.settings import FlowSettings
from schemas.errors import LabelsError, UsageError
from schemas.events import ConversationEvent, Turn

QUESTION_KEYS = ("question", "user_message")
ANSWER_KEYS = ("answer", "response")
SOURCE_TOPIC = "judge"  # the events' provenance in logs: no Kafka is involved


@dataclass(frozen=True, slots=True)
class Pair:
    """One question/answer pair to judge, with the conversation before it as written, or the reason its input line
    could not be read."""

    index: int
    question: str = ""
    answer: str = ""
    context: tuple[Turn, ...] = ()  # the earlier turns, oldest first (empty: the pair stands alone)
    system: str = ""  # the assistant's system instructions ('' when none)
    input_error: str | None = None


def pair_event(pair: Pair, now: datetime, window: ContextWindow) -> ConversationEvent:
    """The event the guard judges for `pair` (`calibration.run.offline_event`), named by its place in the input, its
    context and system instructions cut to `window` as the service cuts them."""
    turn = sum(1 for t in pair.context if t.role == "user")
    return offline_event(
        f"pair-{pair.index}",
        pair.index,
        (pair.question, pair.answer),
        (pair.context, pair.system, turn),
        now,
        window,
        SOURCE_TOPIC,
    )


@dataclass(frozen=True, slots=True)
class Outcome:
    """A pair and what the judge made of it."""

    pair: Pair
    context_turns: int = 0  # the earlier messages the judge read, after the window
    judgement: Judgement | None = None
    error_reason: str | None = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        """True when the pair was scored."""
        return self.judgement is not None


def register(subparsers: Any) -> None:
    """Add the `judge` subcommand to the CLI's subparsers."""
    p = subparsers.add_parser(
        "judge",
        help="judge question/answer pairs once and print scores and reasoning (settings from MONITOR_* env vars)",
        description="Judge question/answer pairs with the configured judge and print the verdicts. "
        "Give --question and --answer, or --file with one JSON object per line "
        '({"question": ..., "answer": ...}; "user_message"/"response" also accepted). '
        'A follow-up also gives "context", the earlier turns oldest first ([{"role": "user", "text": ...}, '
        '{"role": "assistant", "text": ...}, ...]), and may give "system", the assistant\'s instructions; the judge '
        "reads them cut to the context window (MONITOR_JUDGE_CONTEXT_TURNS, MONITOR_JUDGE_CONTEXT_MAX_CHARS, "
        "MONITOR_JUDGE_CONTEXT_SYSTEM) as the service would. Exit code 1 if any pair could not be judged.",
    )
    p.add_argument("--question", "-q", help="the user's question (required with --answer, unless --file is given)")
    p.add_argument("--answer", "-a", help="the assistant's answer (required with --question, unless --file is given)")
    p.add_argument(
        "--file",
        "-f",
        metavar="FILE",
        help="JSONL file of pairs, '-' reads stdin (required unless --question and --answer are given)",
    )
    p.add_argument(
        "--verbose",
        "-v",
        action="store_true",
        help="also show each statement with its verdict and reason, and how many earlier messages the judge read",
    )
    p.add_argument(
        "--format",
        choices=["table", "json"],
        default="table",
        help="table, or json: one object per pair, with context_turns, the earlier messages read (default: table)",
    )
    add_setting_flags(p, "judge", JUDGE_SETTINGS, JUDGE_ENV_ONLY)
    # Former spellings, from before the flags were named like those of `run` and `sql`.
    add_renamed_flag(p, "--model", "--judge-model", "judge_model")
    add_renamed_flag(p, "--json", "--format json", "format", const="json")
    p.set_defaults(func=cmd_judge)


def cmd_judge(ns: argparse.Namespace) -> int:
    """The `judge` command: configure logging (to stderr), judge the pairs, print them; exit 1 if any failed."""
    from monitor.runtime.logs import configure_logging

    settings = settings_from_args(ns)
    configure_logging(settings.process.log_format, settings.process.log_level)
    return run_judge(ns, settings)


def run_judge(
    ns: argparse.Namespace, settings: Settings | None = None, out: IO[str] | None = None, err: IO[str] | None = None
) -> int:
    """Judge the pairs named by `ns` and print them to `out`; raises `ConfigError` or `UsageError` for bad input."""
    from monitor.judges.factory import build_judge

    out = out or sys.stdout
    err = err or sys.stderr
    pairs = read_pairs(ns)
    settings = settings or settings_from_args(ns)
    judge = build_judge(settings.judge)
    outcomes = asyncio.run(_judge_all(judge, pairs, settings.flow, settings.judge.context_window()))
    if ns.format == "json":
        for o in outcomes:
            out.write(json.dumps(outcome_dict(o, judge.info), ensure_ascii=False) + "\n")
    else:
        print_table(outcomes, judge.info, verbose=ns.verbose, out=out)
    failed = [o for o in outcomes if not o.ok]
    for o in failed:
        err.write(f"relevancy-monitor judge: pair {o.pair.index}: {o.error_reason}: {o.error}\n")
    return 1 if failed else 0


def read_pairs(ns: argparse.Namespace) -> list[Pair]:
    """Pairs from --question/--answer or --file; raises `UsageError` when neither or both are given."""
    if ns.file is not None:
        if ns.question is not None or ns.answer is not None:
            raise UsageError("give either --question and --answer, or --file, not both")
        if ns.file == "-":
            lines = sys.stdin.read().splitlines()
        else:
            try:
                lines = Path(ns.file).read_text(encoding="utf-8").splitlines()
            except OSError as e:
                raise UsageError(f"cannot read --file {ns.file}: {e.strerror or e}") from None
        pairs = [parse_line(n, line) for n, line in enumerate(lines, start=1) if line.strip()]
        if not pairs:
            raise UsageError(f"no pairs in {ns.file}")
        return pairs
    if ns.question is None or ns.answer is None:
        raise UsageError("give --question and --answer, or --file FILE")
    return [Pair(index=1, question=ns.question, answer=ns.answer)]


def parse_line(number: int, line: str) -> Pair:
    """One JSONL line as a pair; a bad line becomes a pair carrying its input error."""
    try:
        obj = json.loads(line)
    except ValueError:
        return Pair(index=number, input_error=f"line {number}: not valid JSON")
    if not isinstance(obj, dict):
        return Pair(index=number, input_error=f"line {number}: not a JSON object")
    question = next((obj[k] for k in QUESTION_KEYS if k in obj), None)
    answer = next((obj[k] for k in ANSWER_KEYS if k in obj), None)
    if not isinstance(question, str) or not isinstance(answer, str):
        return Pair(
            index=number,
            input_error=f"line {number}: needs string fields question (or user_message) and answer (or response)",
        )

    def bad(problem: str) -> LabelsError:
        return LabelsError(f"line {number}: {problem}")

    try:
        # The labelled sets' reader: one shape for a multi-turn case, whether it is labelled or only judged.
        context = parse_context(obj.get("context"), bad)
        system = parse_system(obj.get("system"), bad)
    except LabelsError as e:
        return Pair(index=number, input_error=str(e))
    return Pair(index=number, question=question, answer=answer, context=context, system=system)


async def _judge_all(judge: Judge, pairs: Sequence[Pair], flow: FlowSettings, window: ContextWindow) -> list[Outcome]:
    # The service's guards (adaptive concurrency, the rate limit, the circuit breaker, the timeout): a file of pairs
    # meets the provider's limits the way the live traffic does, but gives up after the attempts (`patient=False`).
    guard = GuardedJudge(judge, flow, JudgingMetrics(), on_spent=lambda usage: None, patient=False)
    now = datetime.now(UTC)

    async def one(pair: Pair) -> Outcome:
        if pair.input_error is not None:
            return Outcome(pair, error_reason="bad_input", error=pair.input_error)
        event = pair_event(pair, now, window)
        read = len(event.context)
        outcome = await guard.judge_event(event, still_wanted=lambda: True)
        assert outcome is not None  # still_wanted is always true: only a verdict or a failure ends the call
        if isinstance(outcome.verdict, JudgeFailure):
            return Outcome(pair, read, error_reason=outcome.verdict.reason, error=outcome.verdict.detail)
        return Outcome(pair, read, judgement=outcome.verdict)

    try:
        return list(await asyncio.gather(*(one(p) for p in pairs)))
    finally:
        await judge.aclose()


def outcome_dict(o: Outcome, info: JudgeInfo) -> dict[str, Any]:
    """The JSON object printed for one pair with --json."""
    base: dict[str, Any] = {
        "index": o.pair.index,
        "question": o.pair.question,
        "answer": o.pair.answer,
        "context_turns": o.context_turns,
        "judge": asdict(info),
    }
    if o.judgement is None:
        return {**base, "ok": False, "error": {"reason": o.error_reason, "message": o.error}}
    j = o.judgement
    return {
        **base,
        "ok": True,
        "score": j.score,
        "raw_score": j.raw_score,
        "reasoning": j.reasoning,
        "statements": [
            {"statement": s, "verdict": v, "reason": r}
            for s, v, r in zip(j.statements, j.verdicts, j.verdict_reasons, strict=True)
        ],
        "usage": asdict(j.usage),
    }


_VERDICT_STYLE = {"yes": "green", "no": "red", "idk": "yellow"}


def print_table(outcomes: Sequence[Outcome], info: JudgeInfo, *, verbose: bool, out: IO[str]) -> None:
    """A rich table: one row per pair; with `verbose`, each pair's statements and verdicts below it."""
    from rich.console import Console
    from rich.table import Table

    console = Console(file=out)
    kind = "heuristic" if info.heuristic else info.model
    table = Table(title=f"{info.method} judge ({kind}, {info.judge_id})", show_lines=True)
    for col in ("#", "score", "raw", "reasoning", "tokens in/out/cache r/w", "cost USD"):
        table.add_column(col, overflow="fold")
    for o in outcomes:
        if o.judgement is None:
            table.add_row(
                str(o.pair.index),
                "[red]error[/red]",
                "",
                f"[red]{o.error_reason}: {_escape(o.error or '')}[/red]",
                "",
                "",
            )
            continue
        j, u = o.judgement, o.judgement.usage
        cost = "n/a (no price)" if u.cost_usd is None else f"{u.cost_usd:.6f}"
        tokens = f"{u.input_tokens}/{u.output_tokens}/{u.cache_read_tokens}/{u.cache_write_tokens}"
        table.add_row(str(o.pair.index), f"{j.score:.3f}", f"{j.raw_score:.3g}", _escape(j.reasoning), tokens, cost)
    console.print(table)
    if not verbose:
        return
    for o in outcomes:
        if o.judgement is None:
            continue
        read = (
            f" (after {o.context_turns} earlier message{'' if o.context_turns == 1 else 's'})" if o.pair.context else ""
        )
        detail = Table(title=f"pair {o.pair.index}{read}: {_escape(_clip(o.pair.question, 100))}", show_lines=False)
        for col in ("#", "verdict", "statement", "reason"):
            detail.add_column(col, overflow="fold")
        for n, (s, v, r) in enumerate(
            zip(o.judgement.statements, o.judgement.verdicts, o.judgement.verdict_reasons, strict=True), start=1
        ):
            style = _VERDICT_STYLE.get(v, "")
            detail.add_row(str(n), f"[{style}]{v}[/{style}]" if style else v, _escape(s), _escape(r))
        if not o.judgement.statements:
            detail.add_row("", "", "(this judge gives no per-statement verdicts)", "")
        console.print(detail)


def _escape(text: str) -> str:
    from rich.markup import escape

    return escape(text)


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
