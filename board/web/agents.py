"""The Agents page: each endpoint of the signed-in human (vended or connected through
OAuth) with its queues, the todos it holds now and how alive each open attempt is, and when
it was last heard from. One scoped read (Store.agents_of_user)."""

from __future__ import annotations

from collections import Counter

from litestar import Request, Response, get

from board.store.liveness import LEVELS, WAITING
from board.web.context import page, require_human, runtime

# The Board's levels in the summary's order, in its words.
SUMMARY_LEVELS = ((WAITING, "waiting for a person"), *((level, level) for level in LEVELS))


def liveness_summary(held: list[dict]) -> str:
    """The open attempts' liveness in words: "1 waiting for a person, 2 live, 1 quiet", or
    "nothing held"."""
    counts = Counter(a["liveness"] for a in held)
    return ", ".join(f"{counts[level]} {words}" for level, words in SUMMARY_LEVELS if counts[level]) or "nothing held"


@get("/agents", name="agents")
async def agents_page(request: Request) -> Response:
    human, session = await require_human(request)
    agents = await runtime(request).store.agents_of_user(human.user_id)
    return page(request, "agents.html", session=session, human=human, title="Agents", active="agents",
                agents=agents, liveness_summary=liveness_summary)


def handlers() -> list:
    return [agents_page]
