"""Which judge the demo plans: the statements LLM judge whenever any provider is configured, the lexical heuristic
otherwise."""

from __future__ import annotations

from pathlib import Path

import pytest

from monitor.devtools.demo import plan_demo


@pytest.mark.parametrize(
    ("env", "judge"),
    [
        ({}, "lexical"),
        ({"ANTHROPIC_API_KEY": "sk-ant"}, "statements"),
        ({"MONITOR_JUDGE_API_KEY": "k"}, "statements"),
        ({"MONITOR_JUDGE_PROVIDER": "openai", "MONITOR_JUDGE_BASE_URL": "http://vllm:8000/v1"}, "statements"),
        ({"MONITOR_JUDGE_PROVIDER": "bedrock"}, "statements"),
        ({"MONITOR_JUDGE_PROVIDER": "anthropic"}, "lexical"),
        ({"ANTHROPIC_API_KEY": "  "}, "lexical"),
    ],
)
def test_the_demo_judges_with_an_llm_whenever_a_provider_is_configured(
    tmp_path: Path, env: dict[str, str], judge: str
) -> None:
    """A local vLLM (no key) or a cloud provider gets the LLM demo like an Anthropic key does."""
    plan = plan_demo(120.0, 40.0, tmp_path / "d", tmp_path / "r.html", env)
    assert plan.judge == judge and (plan.rate == 4.0) == (judge == "statements")
