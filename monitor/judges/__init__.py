"""Relevancy judges: one async call from (question, response) to a `Judgement`."""

from monitor.judges.base import Judgement, JudgeInfo, Usage, make_judge_id
from schemas.errors import JudgeError, JudgeReplyInvalid, JudgeUnavailable
from monitor.judges.lexical import LexicalJudge
from monitor.judges.messages_client import MessagesClient
from schemas.errors import JudgeApiError
from monitor.judges.rubric import RubricJudge
from monitor.judges.statements import StatementsJudge

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
