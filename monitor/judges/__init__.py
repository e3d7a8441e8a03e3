"""Relevancy judges: one async call from (question, response) to a `Judgement`."""

from monitor.judges.base import JudgeInfo, Judgement, Usage, make_judge_id
from monitor.judges.lexical import LexicalJudge
from monitor.judges.messages_client import MessagesClient
from monitor.judges.rubric import RubricJudge
from monitor.judges.statements import StatementsJudge
from schemas.errors import JudgeApiError, JudgeError, JudgeReplyInvalid, JudgeUnavailable

__all__ = [
    "JudgeApiError",
    "JudgeError",
    "JudgeInfo",
    "JudgeReplyInvalid",
    "JudgeUnavailable",
    "Judgement",
    "LexicalJudge",
    "MessagesClient",
    "RubricJudge",
    "StatementsJudge",
    "Usage",
    "make_judge_id",
]
