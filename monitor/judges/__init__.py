"""Relevancy judges: one async call from (question, response) to a `Judgement`.

`base` (verdicts, failures, identity, and the `Judge` Protocol), `lexical` (the offline heuristic), `llm` with `rubric`
and `statements` (the LLM judges), `judge_client` (one request through any provider: retries, validation, the
structured-output ladder, cost), `providers` (the seam beneath it: Anthropic's Messages API, also on Bedrock and
Vertex, and Chat Completions for OpenAI, Azure OpenAI and OpenAI-compatible servers), `prompts`,
`structured_output`, `pricing`, `settings` (the judge slice of the configuration) and `factory` (choosing one).
Import the module you need: importing this package loads nothing, so commands that never judge do not pay for an
API client."""
