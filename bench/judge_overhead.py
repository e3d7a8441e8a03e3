"""Judge overhead against the SDK alone, both against the same local fake Messages API, in the same run.

Baseline: `AsyncAnthropic.messages.create` with the same system prompt, user message and output schema,
N calls at a fixed concurrency. Measured: `StatementsJudge.judge` for the same N pairs (prompt building,
structured-output validation, retry bookkeeping, usage and cost). Reported: calls/s of each and the ratio.
Run: `python -m bench.judge_overhead [N]`."""

from __future__ import annotations

import asyncio
import sys
import time

import anthropic

from monitor.config import load_settings
from monitor.judges.prompts import user_message
from monitor.judges.statements import StatementsJudge
from tests.fake_messages_api import API_KEY, FakeMessagesAPI

QUESTION = "When did order A17 ship?"
ANSWER = "Thanks for getting in touch. We also sell gift cards. Order A17 shipped on 3 March."
CONCURRENCY = 16


async def _bounded(n: int, call: object) -> float:
    sem = asyncio.Semaphore(CONCURRENCY)

    async def one() -> None:
        async with sem:
            await call()  # type: ignore[operator]

    started = time.perf_counter()
    await asyncio.gather(*(one() for _ in range(n)))
    return time.perf_counter() - started


async def main(n: int) -> None:
    with FakeMessagesAPI() as api:
        settings = load_settings(judge="statements", anthropic_base_url=api.base_url, anthropic_api_key=API_KEY)
        judge = StatementsJudge(settings.judge_client)
        client = anthropic.AsyncAnthropic(api_key=API_KEY, base_url=api.base_url, max_retries=0)
        system = [{"type": "text", "text": judge.system_prompt, "cache_control": {"type": "ephemeral"}}]
        output_config = judge._output_config

        async def sdk_call() -> None:
            await client.messages.create(
                model=settings.judge_model,
                max_tokens=settings.judge_max_tokens,
                system=system,  # type: ignore[arg-type]
                messages=[{"role": "user", "content": user_message(QUESTION, ANSWER, 20_000)}],
                output_config=output_config,
            )

        async def judge_call() -> None:
            await judge.judge(QUESTION, ANSWER)

        await _bounded(20, sdk_call)  # warm both paths (connections, imports)
        await _bounded(20, judge_call)
        sdk = await _bounded(n, sdk_call)
        ours = await _bounded(n, judge_call)
        await client.close()
        await judge.aclose()
    print(f"calls: {n} at concurrency {CONCURRENCY}, local fake Messages API")
    print(f"SDK alone (messages.create) : {n / sdk:8.0f} calls/s ({sdk:.2f} s)")
    print(f"StatementsJudge.judge       : {n / ours:8.0f} calls/s ({ours:.2f} s)")
    print(f"ratio judge/SDK             : {sdk / ours:8.2f}")


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 500))
