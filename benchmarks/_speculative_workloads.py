"""bench_speculative's workloads and its client: what each stream asks, on which face, how its
answer's tokens and text are read, and a server's draft counters.

Each workload's i-th stream gets a prompt of its own (the numbers in it differ), so that at 16
streams no two slots hold the same prompt; the shape, and so the share a greedy answer can copy
from its prompt, stays the same.
"""

from __future__ import annotations

import asyncio
import subprocess
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from benchmarks._common import client_session

JSON = dict[str, Any]


def read_chat(answer: JSON) -> tuple[int, str]:
    return answer["usage"]["completion_tokens"], answer["choices"][0]["message"]["content"]


def read_messages(answer: JSON) -> tuple[int, str]:
    text = "".join(b.get("text", "") for b in answer["content"] if b.get("type") == "text")
    return answer["usage"]["output_tokens"], text


@dataclass(frozen=True)
class Face:
    """An API a request is sent to: its path, its headers, and how its answer reads."""

    path: str
    read: Callable[[JSON], tuple[int, str]]
    headers: dict[str, str] = field(default_factory=dict)


CHAT = Face("/v1/chat/completions", read_chat)
# As Claude Code and the Anthropic SDK send them; both servers take any key.
MESSAGES = Face(
    "/v1/messages",
    read_messages,
    {"anthropic-version": "2023-06-01", "x-api-key": "none", "content-type": "application/json"},
)


@dataclass(frozen=True)
class Workload:
    """A face, and the i-th stream's conversation (its `messages`, and `system` if any)."""

    face: Face
    turn: Callable[[int], JSON]


def user(prompt: str) -> JSON:
    return {"messages": [{"role": "user", "content": prompt}]}


def edit_prompt(i: int) -> str:
    body = []
    for j in range(28):
        body.append(f"    if x > {j * 3 + i}:")
        body.append(f"        x = x - {j + 1}")
    lines = [f"def settle_{i}(x):", *body, "    return x"]
    return (
        "Here is a Python function:\n\n" + "\n".join(lines) + "\n\nReturn it with the variable "
        "`x` renamed to `count`. Write only the code."
    )


def rag_prompt(i: int) -> str:
    facts = [
        f"The station at kilometre {k * 12 + i} of the northern line opened in {1890 + k} "
        f"and serves {k * 300 + 150} passengers a day."
        for k in range(20)
    ]
    return (
        "Context:\n" + "\n".join(facts) + "\n\nQuestion: list every station of the northern "
        "line with its opening year and its passengers, quoting the context's sentences."
    )


AGENT_SYSTEM = (
    "You are a coding agent working in the user's repository. When the user asks for a change "
    "to a file, you reply with the complete updated file and nothing else: no explanation, no "
    "Markdown fences. Every line the change does not touch stays exactly as it was, comments "
    "and blank lines included."
)


def agent_file(i: int) -> str:
    """A small module of about 40 lines, as an agent reads it from the user's disk."""
    return f'''"""Stock levels and reservations for warehouse W{i:03d}."""

from __future__ import annotations

from dataclasses import dataclass, field

RESTOCK_LEVEL = {5 + i % 7}
MAX_ORDER = {40 + i}


@dataclass
class Item:
    sku: str
    name: str
    count: int = 0
    reserved: int = 0

    @property
    def available(self) -> int:
        return self.count - self.reserved


@dataclass
class Warehouse:
    code: str = "W{i:03d}"
    items: dict[str, Item] = field(default_factory=dict)

    def add(self, sku: str, name: str, count: int) -> Item:
        item = self.items.setdefault(sku, Item(sku, name))
        item.count += count
        return item

    def reserve(self, sku: str, amount: int) -> bool:
        item = self.items.get(sku)
        if item is None or amount > MAX_ORDER or item.available < amount:
            return False
        item.reserved += amount
        return True

    def ship(self, sku: str, amount: int) -> None:
        item = self.items[sku]
        item.reserved -= amount
        item.count -= amount

    def to_restock(self) -> list[str]:
        return sorted(s for s, it in self.items.items() if it.available < RESTOCK_LEVEL)


def total_value(warehouse: Warehouse, prices: dict[str, float]) -> float:
    return sum(prices.get(s, 0.0) * it.count for s, it in warehouse.items.items())
'''


def agent_edit(i: int) -> JSON:
    # One change in one place: `ship` keeps its own `amount`, so the answer is the file copied
    # whole but for the four `amount`s of one function.
    ask = (
        f"Here is `stock_{i}.py`:\n\n```python\n{agent_file(i)}```\n\nIn `Warehouse.reserve` "
        "only, rename the parameter `amount` to `quantity`. Reply with the full file only."
    )
    return {"system": AGENT_SYSTEM, **user(ask)}


WORKLOADS = {
    "edit": Workload(CHAT, lambda i: user(edit_prompt(i))),
    "agent-edit": Workload(MESSAGES, agent_edit),
    "rag": Workload(CHAT, lambda i: user(rag_prompt(i))),
}


async def ask(
    session: aiohttp.ClientSession, base: str, workload: Workload, i: int, fields: JSON
) -> tuple[int, str]:
    """Stream i's answer: its output tokens and its text; an error ends the run."""
    body = {**workload.turn(i), **fields}
    face = workload.face
    async with session.post(base + face.path, json=body, headers=face.headers) as r:
        if r.status != 200:
            raise RuntimeError(f"{face.path}: HTTP {r.status}: {(await r.text())[:300]}")
        return face.read(await r.json())


async def batch(
    base: str, workload: Workload, streams: int, fields: JSON
) -> tuple[float, list[str]]:
    """`streams` requests at once, each with `fields` added to its body: all their output
    tokens over the wall time, and the answers in stream order."""
    async with client_session() as session:
        t0 = time.perf_counter()
        results = await asyncio.gather(
            *(ask(session, base, workload, i, fields) for i in range(streams))
        )
        wall = time.perf_counter() - t0
    return sum(n for n, _ in results) / wall, [text for _, text in results]


def run_batch(base: str, workload: Workload, streams: int, fields: JSON) -> tuple[float, list[str]]:
    return asyncio.run(batch(base, workload, streams, fields))


def metric_totals(base: str, names: tuple[str, str]) -> tuple[float, float]:
    """Two counters of a server's /metrics, each summed over its labels (one model here)."""
    text = urllib.request.urlopen(base + "/metrics").read().decode()
    totals = dict.fromkeys(names, 0.0)
    for line in text.splitlines():
        name = line.split("{")[0].split(" ")[0]
        if name in totals:
            totals[name] += float(line.split()[-1])
    return totals[names[0]], totals[names[1]]


def llama_version(binary: str) -> str:
    """`llama-server --version`'s build line: which llama.cpp the anchor is."""
    try:
        done = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return "version unknown"
    lines = [
        line for line in (done.stdout + done.stderr).splitlines() if line.startswith("version")
    ]
    return lines[0] if lines else "version unknown"
