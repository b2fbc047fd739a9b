"""The two agent shapes bench_agent.py replays: Claude Code's requests on Anthropic's
/v1/messages and Codex's on OpenAI's /v1/responses, each turn built from the answers so far, with
a long harness text and tool definitions of our own."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

ANSWER = 16
FOLLOW_UPS = [
    "Now list the files you would change.",
    "Explain the first change briefly.",
    "Write the test for it.",
]
TOPICS = [
    "a file",
    "a folder",
    "a branch",
    "a test",
    "a build",
    "a process",
    "a package",
    "a commit",
    "a diff",
    "a log",
    "a config",
    "a server",
    "a request",
    "a schema",
]
VERBS = [
    "reads",
    "writes",
    "lists",
    "edits",
    "runs",
    "stops",
    "finds",
    "checks",
    "moves",
    "renames",
    "creates",
    "deletes",
    "watches",
    "formats",
    "merges",
    "explains",
]


def _harness(paragraphs: int) -> str:
    """A long, varied agent harness text (the model sees many distinct words, as in a real
    system prompt, not one sentence repeated)."""
    lines = ["You are a coding agent working in the user's repository. Follow these rules."]
    for i in range(paragraphs):
        verb, topic = VERBS[i % len(VERBS)], TOPICS[(i * 7) % len(TOPICS)]
        lines.append(
            f"Rule {i + 1}: when the user asks about {topic}, the agent {verb} it with the "
            f"matching tool, reports what changed in one short sentence, never guesses at "
            f"{topic} it has not read, and keeps step {i % 9 + 1} of the plan in view."
        )
    return "\n".join(lines)


def _tools(n: int) -> list[tuple[str, str, dict[str, Any]]]:
    out = []
    for i in range(n):
        verb, topic = VERBS[i % len(VERBS)], TOPICS[i % len(TOPICS)]
        name = f"{verb.capitalize()}{topic.split()[1].capitalize()}{i}"
        description = (
            f"{verb.capitalize()} {topic} in the workspace. Use it instead of shell "
            f"commands when you need to {verb.rstrip('s')} {topic}; it returns a "
            "short report and fails with a clear error when the target is missing."
        )
        schema = {
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": f"the {topic.split()[1]} to use"},
                "limit": {"type": "integer", "minimum": 1, "description": "at most this many"},
                "dry_run": {"type": "boolean", "description": "only say what would happen"},
            },
            "required": ["path"],
            "additionalProperties": False,
        }
        out.append((name, description, schema))
    return out


@dataclass
class Conversation:
    """One agent's session: the request of each turn, built from the answers so far."""

    shape: str
    model: str
    answers: list[str] = field(default_factory=list)

    def request(self, turn: int) -> tuple[str, dict[str, Any]]:
        return self._claude(turn) if self.shape == "claude" else self._codex(turn)

    def _claude(self, turn: int) -> tuple[str, dict[str, Any]]:
        system = [
            {
                "type": "text",
                "text": f"x-anthropic-billing-header: cc_version=2.1.{turn}; "
                f"cc_entrypoint=sdk-cli; cch={turn * 7919:05x};",
            },
            {
                "type": "text",
                "text": "You are an agent built on an agent SDK.",
                "cache_control": {"type": "ephemeral"},
            },
            {"type": "text", "text": _harness(200), "cache_control": {"type": "ephemeral"}},
        ]
        messages: list[dict[str, Any]] = [
            {
                "role": "user",
                "content": [
                    {
                        "type": "text",
                        "text": "<system-reminder>\nEnd commit messages with the "
                        "attribution line.\n</system-reminder>\n",
                    },
                    {"type": "text", "text": "Fix the failing test in the parser module."},
                ],
            },
            {
                "role": "system",
                "content": [
                    {
                        "type": "text",
                        "text": "# Environment\nPrimary working directory: /work\nPlatform: linux",
                    }
                ],
            },
        ]
        for answer, ask in zip(self.answers, FOLLOW_UPS):
            messages += [
                {"role": "assistant", "content": [{"type": "text", "text": answer}]},
                {"role": "user", "content": [{"type": "text", "text": ask}]},
            ]
        tools = [{"name": n, "description": d, "input_schema": s} for n, d, s in _tools(24)]
        return "/v1/messages", {
            "model": self.model,
            "system": system,
            "messages": messages,
            "tools": tools,
            "max_tokens": ANSWER,
            "temperature": 0,
            "stream": True,
            "thinking": {"type": "adaptive"},
            "metadata": {"user_id": "bench"},
        }

    def _codex(self, turn: int) -> tuple[str, dict[str, Any]]:
        def message(role: str, text: str) -> dict[str, Any]:
            kind = "output_text" if role == "assistant" else "input_text"
            return {"type": "message", "role": role, "content": [{"type": kind, "text": text}]}

        items = [
            message("developer", _harness(120)),
            message(
                "developer",
                "<skills_instructions>\nNo skills are installed.\n</skills_instructions>",
            ),
            message(
                "user",
                "<environment_context>\n  <cwd>/work</cwd>\n  <shell>bash</shell>\n"
                "</environment_context>",
            ),
            message("user", "Fix the failing test in the parser module."),
        ]
        for answer, ask in zip(self.answers, FOLLOW_UPS):
            items += [message("assistant", answer), message("user", ask)]
        tools: list[dict[str, Any]] = [
            {"type": "function", "name": n, "description": d, "parameters": s, "strict": False}
            for n, d, s in _tools(8)
        ]
        tools.append({"type": "web_search", "external_web_access": False})
        return "/v1/responses", {
            "model": self.model,
            "input": items,
            "tools": tools,
            "tool_choice": "auto",
            "parallel_tool_calls": True,
            "reasoning": {"summary": "auto"},
            "store": False,
            "stream": True,
            "max_output_tokens": ANSWER,
            "temperature": 0,
            "prompt_cache_key": "bench",
        }
