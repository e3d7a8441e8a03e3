"""The provider seam under the LLM judges: one Protocol (`base.Provider`: send one judge request, get the reply's
text and its tokens) and one implementation per API family: `anthropic_messages` (Anthropic's Messages API, also
through Bedrock and Vertex) and `openai_chat` (Chat Completions: OpenAI, Azure OpenAI, vLLM, Ollama, LiteLLM).
`factory.build_provider` picks one from the judge settings. Import the module you need: this package loads no SDK."""
