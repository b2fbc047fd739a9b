"""Anthropic's face: the Messages API (Claude Code's) and count_tokens."""
