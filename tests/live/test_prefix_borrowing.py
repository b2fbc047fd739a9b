"""A request that starts like one already in another slot copies that slot's cells instead of
prefilling the shared start again, and answers exactly as if it had prefilled it."""

from __future__ import annotations

import threading

import openai

from tests.support.live import CLIENT_TIMEOUT_S

SHARED = (
    "You are a careful assistant. Here is a document about the river Danube. The Danube flows "
    "from the Black Forest in Germany through Vienna, Bratislava, Budapest and Belgrade to the "
    "Black Sea, crossing or bordering ten countries. It is Europe's second-longest river. "
)


def ask(client: openai.OpenAI, question: str, max_tokens: int = 24):
    return client.chat.completions.create(
        model="smollm2",
        temperature=0,
        max_tokens=max_tokens,
        messages=[{"role": "system", "content": SHARED}, {"role": "user", "content": question}],
    )


def client_for(url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{url}/v1", api_key="-", timeout=CLIENT_TIMEOUT_S, max_retries=0)


def test_a_request_borrows_the_shared_prefix_of_a_running_one_and_answers_the_same(daemon_factory):
    args = ("--model", "smollm2", "--parallel", "2", "--ctx", "1024")
    _, fresh_url = daemon_factory(args)
    expected = ask(client_for(fresh_url), "Which city does it reach last?")
    assert expected.usage.prompt_tokens_details.cached_tokens == 0

    _, url = daemon_factory(args)
    client = client_for(url)
    started = threading.Event()

    def long_answer() -> None:  # holds slot A, its prompt cells written, while B arrives
        stream = client.chat.completions.create(
            model="smollm2",
            temperature=0,
            max_tokens=200,
            stream=True,
            messages=[
                {"role": "system", "content": SHARED},
                {"role": "user", "content": "Tell me all about it."},
            ],
        )
        for _ in stream:
            started.set()

    runner = threading.Thread(target=long_answer)
    runner.start()
    assert started.wait(CLIENT_TIMEOUT_S)
    borrowed = ask(client, "Which city does it reach last?")
    runner.join()
    assert borrowed.usage.prompt_tokens_details.cached_tokens >= 40
    assert borrowed.choices[0].message.content == expected.choices[0].message.content
