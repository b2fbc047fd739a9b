"""A request's `speculative` field on a live daemon, and the drafts /metrics counts for it
(`localserve_draft_tokens_total`, `localserve_draft_tokens_accepted_total`).

The request is an edit whose answer copies its prompt, so prompt lookup finds drafts at once;
a fresh daemon drafts them, since until a drafted step is measured the cost model holds to
its prior, where a few drafts pay. Drafting by a draft model is not shown here: the only pair
of models sharing a vocabulary here is SmolLM2 with itself, whose drafts cost as much as the
model's own tokens and so never pay; test_draft_model.py forces them in-process.
"""

from __future__ import annotations

from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from tests.support.daemons import post_json
from tests.support.helpers import MODEL
from tests.support.live import CLIENT_TIMEOUT_S
from tests.support.speculative_support import EDIT

ARGS = ("--model", MODEL, "--parallel", "2", "--ctx", "1024")


def drafts(url: str) -> tuple[float, float]:
    """(draft tokens verified, draft tokens kept) so far, by the model's /metrics."""
    text = httpx.get(f"{url}/metrics", timeout=30).text
    found = {
        s.name: s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.labels.get("model") == MODEL
    }
    return (
        found.get("localserve_draft_tokens_total", 0.0),
        found.get("localserve_draft_tokens_accepted_total", 0.0),
    )


def edit(url: str, **speculative: Any) -> None:
    body = {
        "model": MODEL,
        "messages": [{"role": "user", "content": EDIT}],
        "max_tokens": 60,
        "temperature": 0,
        **speculative,
    }
    status, answer = post_json(f"{url}/v1/chat/completions", body, CLIENT_TIMEOUT_S)
    assert status == 200 and answer["usage"]["completion_tokens"] > 0, answer


def test_the_speculative_field_drafts_where_the_server_does_not_and_metrics_count_them(
    daemon_factory,
) -> None:
    _, url = daemon_factory((*ARGS, "--speculative", "0"))
    edit(url)
    assert drafts(url) == (0.0, 0.0)
    edit(url, speculative=6)
    drafted, accepted = drafts(url)
    assert drafted > 0 and 0 < accepted <= drafted


def test_speculative_false_keeps_a_request_from_drafting_where_the_server_would(
    daemon_factory,
) -> None:
    _, url = daemon_factory((*ARGS, "--speculative", "6"))
    edit(url, speculative=False)
    assert drafts(url) == (0.0, 0.0)
    edit(url)
    drafted, accepted = drafts(url)
    assert drafted > 0 and 0 < accepted <= drafted
