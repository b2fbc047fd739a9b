"""/openapi.json: the API described as the handlers read and answer it. document.py builds the
document and serves it; the schemas are by kind: shapes.py (the builders), fields.py (what
several requests share), requests.py and answers.py (OpenAI's, Ollama's, llama.cpp's and our
admin's), anthropic.py and responses.py (the agent faces)."""
