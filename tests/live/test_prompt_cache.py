"""A conversation whose slot went to another request is saved in host memory, and its next
request restores those cells instead of prefilling them, answering exactly as it would had the
slot kept them."""

from __future__ import annotations

import openai

from tests.support.helpers import raw_request
from tests.support.live import CLIENT_TIMEOUT_S

DOCUMENT = (
    "Here is a document about the river Danube. The Danube flows from the Black Forest in "
    "Germany through Vienna, Bratislava, Budapest and Belgrade to the Black Sea, crossing or "
    "bordering ten countries. It is Europe's second-longest river after the Volga. "
)
OTHER = "Write a short poem about a cat who sleeps all day in the sun."
ONE_SLOT = ("--model", "smollm2", "--parallel", "1", "--ctx", "1024")


def ask(client: openai.OpenAI, content: str):
    return client.chat.completions.create(
        model="smollm2",
        temperature=0,
        max_tokens=24,
        messages=[{"role": "user", "content": content}],
    )


def client_for(url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{url}/v1", api_key="-", timeout=CLIENT_TIMEOUT_S, max_retries=0)


def prompt_cache_stats(url: str) -> dict:
    status, _, body = raw_request(f"{url}/api/ps")
    assert status == 200
    return body["models"][0]["localserve"]["prompt_cache"]


def test_a_conversation_evicted_from_its_slot_is_restored_from_the_prompt_cache(daemon_factory):
    _, url = daemon_factory(ONE_SLOT)
    client = client_for(url)
    ask(client, DOCUMENT + "Which city does it reach last?")
    # Asked again while the slot still holds it: only the last prompt token runs. (A full
    # prefill may answer differently: llama.cpp's sums round differently in a longer batch.)
    kept = ask(client, DOCUMENT + "Which city does it reach last?")
    ask(client, OTHER)  # the only slot now holds another conversation
    restored = ask(client, DOCUMENT + "Which city does it reach last?")
    assert restored.usage.prompt_tokens_details.cached_tokens == restored.usage.prompt_tokens - 1
    assert restored.choices[0].message.content == kept.choices[0].message.content
    stats = prompt_cache_stats(url)
    assert stats["hits"] == 1 and stats["entries"] >= 1
    assert 0 < stats["bytes"] <= stats["limit"]


def test_a_follow_up_question_restores_the_shared_document_from_the_prompt_cache(daemon_factory):
    _, url = daemon_factory(ONE_SLOT)
    client = client_for(url)
    ask(client, DOCUMENT + "Which city does it reach last?")
    ask(client, OTHER)
    follow_up = ask(client, DOCUMENT + "Where does it start?")
    assert follow_up.usage.prompt_tokens_details.cached_tokens >= 60


def test_prompt_cache_zero_turns_it_off(daemon_factory):
    _, url = daemon_factory((*ONE_SLOT, "--prompt-cache", "0"))
    client = client_for(url)
    ask(client, DOCUMENT + "Which city does it reach last?")
    ask(client, OTHER)
    again = ask(client, DOCUMENT + "Which city does it reach last?")
    # Only the chat template's opening, which the other conversation shares, is still cached.
    assert again.usage.prompt_tokens_details.cached_tokens < again.usage.prompt_tokens // 2
    assert prompt_cache_stats(url) is None
