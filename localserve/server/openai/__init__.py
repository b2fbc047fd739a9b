"""OpenAI's face: chat and text completions, and the model list."""
