"""Ollama's face: generate and chat, their options and Go templates, and the store's endpoints."""
