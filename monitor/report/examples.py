"""The command that finds one worst example again (pure): a `relevancy-monitor sql` line to paste into a shell."""

from __future__ import annotations

import shlex

from monitor.report.model import Conversation, Example

_COLUMNS = "event_time, app, prompt_version, judge_id, score, question, response, statements, verdicts, reasoning"


def _literal(value: str) -> str:
    """A ClickHouse string literal: backslashes and quotes escaped, so any event id is one value."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def find_command(example: Example, store: str) -> str:
    """`relevancy-monitor sql [--clickhouse-url chdb://…] '<SELECT … WHERE event_id = …>' --format json`: the
    example's row, by event id and judge. An embedded store is named (it is a path); a server comes from the
    environment, since the page never holds credentials."""
    sql = (
        f"SELECT {_COLUMNS} FROM {{table}} FINAL WHERE event_id = {_literal(example.event_id)} "
        f"AND judge_id = {_literal(example.judge_id)}"
    )
    url = ["--clickhouse-url", shlex.quote(store)] if store.startswith("chdb:") else []
    return " ".join(["relevancy-monitor", "sql", *url, _shell_word(sql), "--format", "json"])


def conversation_command(conversation: Conversation, store: str) -> str:
    """`relevancy-monitor sql ...`: every judged turn of the conversation by its judge, in turn order."""
    sql = (
        "SELECT turn, event_time, status, score, question, response, context_turns, context FROM {table} FINAL "
        f"WHERE conversation_id = {_literal(conversation.conversation_id)} "
        f"AND judge_id = {_literal(conversation.judge_id)} ORDER BY turn, event_time"
    )
    url = ["--clickhouse-url", shlex.quote(store)] if store.startswith("chdb:") else []
    return " ".join(["relevancy-monitor", "sql", *url, _shell_word(sql), "--format", "json"])


def _shell_word(text: str) -> str:
    """`text` as one shell word: in double quotes when nothing in it is special there (the SQL keeps its single
    quotes readable), else quoted the safe way."""
    return f'"{text}"' if not set(text) & set('"$`\\!') else shlex.quote(text)
