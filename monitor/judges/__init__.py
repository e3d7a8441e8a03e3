"""Relevancy judges: one async call from (question, response) to a `Judgement`."""

from monitor.judges.base import Judgement, JudgeError, JudgeInfo, JudgeReplyInvalid, JudgeUnavailable, Usage, make_judge_id
from monitor.judges.lexical import LexicalJudge

__all__ = [
    "JudgeError",
    "JudgeInfo",
    "JudgeReplyInvalid",
    "JudgeUnavailable",
    "Judgement",
    "LexicalJudge",
    "Usage",
    "make_judge_id",
]
