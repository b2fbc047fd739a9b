"""OpenAI's Responses API (Codex's): answers, and the responses stored for follow-ups."""
