"""A request's grammar (its tools' or its answer format's) checked before the request is
queued: by the daemon's compiling pool (server/chat/grammar_pool.py), once per distinct
grammar, within `compile_timeout` seconds, the wait for a busy pool included.

- A grammar whose verdict does not come in time is refused: 400 naming `compile_timeout`, in
  the face's own error format (errors.py).
- Tool and response schemas never fail a request for a keyword the grammar cannot enforce: it
  is left unenforced and said (X-Localserve-Unenforced); a grammar that cannot compile at all
  is dropped, the answer unconstrained and parsed as ever, and said too
  (X-Localserve-Unconstrained).
- A strict one is left for the worker to refuse, with a 400 that names the keyword, as before.

The worker compiles the grammar once more, against the model's vocabulary (backends/guides.py):
what llguidance compiles here cannot cross to its process.
"""

from __future__ import annotations

import logging
from dataclasses import replace

from aiohttp import web

from localserve.ground.sampling import SamplingParams
from localserve.server.chat import structured
from localserve.server.chat.grammar_pool import CompileTimeout, GrammarPool
from localserve.server.http.refused import Refused
from localserve.server.http.request_log import notice
from localserve.server.http.state import MANAGER, owned

log = logging.getLogger("localserve.requests")

GRAMMARS = web.AppKey("grammars", GrammarPool)


def install(app: web.Application) -> None:
    """The daemon's compiling pool, closed with the app."""
    owned(app, GRAMMARS, GrammarPool())


async def checked(request: web.Request, params: SamplingParams) -> SamplingParams:
    """`params` with its grammar as it will run: kept, or dropped where it cannot compile
    (lenient), and what went unenforced said. Refused when the check takes longer than
    `compile_timeout`."""
    grammar = params.grammar
    if grammar is None:
        return params
    timeout = request.app[MANAGER].settings.compile_timeout
    try:
        dropped, failed = await request.app[GRAMMARS].verdict(grammar, timeout or None)
    except CompileTimeout:
        raise Refused(
            400,
            f"the grammar of '{grammar.field}' did not compile within {timeout:g} s "
            "(compile_timeout)",
            grammar.field,
            "compile_timeout",
        ) from None
    if grammar.strict:
        return params
    if failed is not None:
        log.warning("%s cannot be enforced, so it is not: %s", grammar.field, failed)
        notice(request, structured.UNCONSTRAINED_HEADER, structured.header_text(failed))
        return replace(params, grammar=None)
    if dropped:
        log.info("%s: not enforced: %s", grammar.field, "; ".join(dropped))
        notice(request, structured.UNENFORCED_HEADER, structured.header_text("; ".join(dropped)))
    return params
