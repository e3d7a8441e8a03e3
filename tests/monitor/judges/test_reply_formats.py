"""The pinned reply formats (`monitor.judges.reply_formats`) that let Chat Completions judges name their reply format
in the judge id without loading the Anthropic SDK: they must be exactly what the SDK computes, or ids would change."""

from __future__ import annotations

import hashlib
import json

import anthropic
import pytest
from pydantic import BaseModel, Field

from monitor.judges.base import make_judge_id
from monitor.judges.reply_formats import PINNED
from monitor.judges.rubric import RubricJudge, RubricReply
from monitor.judges.settings import JudgeSettings
from monitor.judges.statements import StatementsJudge, StatementsReply
from monitor.judges.structured_output import id_output_config, output_config

REPLY_MODELS = (RubricReply, StatementsReply)


def _key(model: type[BaseModel]) -> str:
    return hashlib.sha256(json.dumps(model.model_json_schema(), sort_keys=True).encode()).hexdigest()


@pytest.mark.parametrize("model", REPLY_MODELS)
def test_every_reply_model_is_pinned_as_the_sdk_transforms_it(model: type[BaseModel]) -> None:
    """Each judge's reply model has a pinned entry, equal to the installed SDK's `transform_schema` (a changed model
    or SDK fails here: regenerate the entry in monitor/judges/reply_formats.py from `anthropic.transform_schema`)."""
    assert _key(model) in PINNED, f"no pinned reply format for {model.__name__}: regenerate reply_formats.py"
    assert PINNED[_key(model)] == anthropic.transform_schema(model)


@pytest.mark.parametrize("provider", ["openai", "azure_openai", "anthropic", "bedrock", "vertex"])
@pytest.mark.parametrize("model", REPLY_MODELS)
def test_the_id_names_the_reply_format_as_the_sdk_does_for_every_provider(
    model: type[BaseModel], provider: str
) -> None:
    """Whichever provider, the judge id's reply format is the Messages API's `output_config` for the model."""
    assert id_output_config(model, provider) == output_config(model)  # type: ignore[arg-type]


def test_an_unpinned_model_falls_back_to_the_sdk() -> None:
    """A reply model without a pinned entry (a new or changed one) is named by the SDK's transform: the same id."""

    class Other(BaseModel):
        score: int = Field(ge=0, le=4)

    assert _key(Other) not in PINNED
    assert id_output_config(Other, "openai") == output_config(Other)


@pytest.mark.parametrize("judge", [RubricJudge, StatementsJudge])
def test_openai_judge_ids_are_those_the_sdk_transform_gives(judge: type[RubricJudge] | type[StatementsJudge]) -> None:
    """An OpenAI-compatible judge's id is the one it had when its template embedded the SDK's transform."""
    settings = JudgeSettings(judge=judge.method, judge_provider="openai", judge_model="gpt-5-mini", judge_api_key="k")
    built = judge(settings)
    template = built.prompt_template().rsplit("\n\n---\n", 1)[0]
    by_sdk = f"{template}\n\n---\n{json.dumps(output_config(judge.reply_model), sort_keys=True)}"
    assert built.prompt_template() == by_sdk
    assert built.info.judge_id == make_judge_id(judge.method, settings.model, by_sdk, built.params())
