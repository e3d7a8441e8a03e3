"""The Anthropic SDK's `transform_schema` of each judge's reply model, pinned, for the judge ids of providers that
do not load that SDK.

A judge id names its reply format by the Messages API's `output_config` (`structured_output.output_config`, the
SDK's transform of the reply model's JSON schema): ids predate the Chat Completions providers, and keep that form so
that no judge's id changes. Importing the SDK for that alone would cost an OpenAI-compatible judge ~45 MB of
resident memory, so those judges read the transform here instead. Keyed by the SHA-256 of the model's own JSON
schema: a reply model that changes misses its entry, and its id is then computed by the SDK as before (correct, only
heavier); tests/monitor/judges/test_reply_formats.py fails until the entry is regenerated, and checks every entry
against the installed SDK."""

from __future__ import annotations

from typing import Any

PINNED: dict[str, dict[str, Any]] = {
    # monitor.judges.rubric.RubricReply
    "ff7adafed528ce6a565b30c2d87b56792630f4ba44c7bb91b92bc972800c7827": {
        "additionalProperties": False,
        "description": "The rubric judge's structured reply.",
        "properties": {
            "reasoning": {
                "description": "one or two sentences explaining the score\n\n{minLength: 1}",
                "title": "Reasoning",
                "type": "string",
            },
            "score": {
                "description": "relevancy score: an integer from 0 to 4\n\n{maximum: 4, minimum: 0}",
                "title": "Score",
                "type": "integer",
            },
        },
        "required": ["reasoning", "score"],
        "title": "RubricReply",
        "type": "object",
    },
    # monitor.judges.statements.StatementsReply
    "5df490685655ed89e629b0d150fe729a0a147c64013ddd04d2820caa6a761b3d": {
        "$defs": {
            "StatementVerdict": {
                "additionalProperties": False,
                "description": "Whether one statement addresses the question.",
                "properties": {
                    "reason": {"description": "a few words; required for no", "title": "Reason", "type": "string"},
                    "verdict": {
                        "description": "yes: addresses the question; no: does not; idk: ambiguous",
                        "enum": ["yes", "no", "idk"],
                        "title": "Verdict",
                    },
                },
                "required": ["verdict", "reason"],
                "title": "StatementVerdict",
                "type": "object",
            }
        },
        "additionalProperties": False,
        "description": "The statements judge's structured reply: statements and their verdicts, one to one.",
        "properties": {
            "statements": {
                "description": "the response's statements, in order",
                "items": {"description": "{minLength: 1}", "type": "string"},
                "minItems": 1,
                "title": "Statements",
                "type": "array",
            },
            "verdicts": {
                "description": "one verdict per statement, same order",
                "items": {"$ref": "#/$defs/StatementVerdict"},
                "minItems": 1,
                "title": "Verdicts",
                "type": "array",
            },
        },
        "required": ["statements", "verdicts"],
        "title": "StatementsReply",
        "type": "object",
    },
}
