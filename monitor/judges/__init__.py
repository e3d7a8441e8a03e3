"""Relevancy judges: one async call from (question, response) to a `Judgement`.

`base` (verdicts, failures, identity, and the `Judge` Protocol), `lexical` (the offline heuristic), `llm` with `rubric`
and `statements` (the Anthropic judges), `messages_client` (the API call and its retries), `prompts`,
`structured_output`, `pricing`, `settings` (the judge slice of the configuration) and `factory` (choosing one). Import
the module you need: importing this package loads nothing, so commands that never judge do not pay for the API
client."""
