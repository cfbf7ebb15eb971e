"""Teams on the Board: the space switcher (which space the Board shows, kept in the session)
and a team's Members page, where its admins add people, change roles and remove members
through the store's team_member_set and team_member_remove (each checked and recorded
there). Which space a request acts in is context.require_human's."""

from __future__ import annotations

from urllib.parse import quote

from litestar import Request, Response, get, post
from litestar.params import FromPath

from board.errors import Conflict, Invalid, NotFound
from board.store.store import Human
from board.store.vocabulary import ROLES
from board.web.context import checked_form, not_found, page, redirect, require_human, require_role, runtime

ROLE_HELP = {
    "viewer": "sees everything of the team, changes nothing",
    "operator": "also acts on todos: claims, releases, fails, retries, cancels, deletes, answers, adds",
    "admin": "also manages members, endpoints, pauses, limits and schedules",
}


@post("/space")
async def space_switch(request: Request) -> Response:
    """The switcher: the Board shows the chosen space from the next page on (its own list,
    overview, agents and schedules), while it is one the person may use."""
    human, session = await require_human(request)
    form = await checked_form(request, session)
    if isinstance(form, Response):
        return form
    person = Human(human.actor, human.username)
    raw = str(form.get("space") or "")
    chosen = await runtime(request).store.human_in(person, int(raw)) if raw.isdigit() and len(raw) < 19 else None
    if chosen is None:
        session.set_flash("error", "That space is not one of yours; the Board shows the one it showed.")
        return redirect(request, "/", session)
    session.set_space(None if chosen.space_name is None else chosen.user_id)
    session.set_flash("info", f"Showing {chosen.space_name or 'your own space'}"
                              f"{'' if chosen.space_name is None else ', as ' + article(chosen.role)}.")
    return redirect(request, "/", session)


def article(role: str) -> str:
    return ("an " if role[0] in "aeiou" else "a ") + role


async def team_human(request: Request) -> tuple[Human, object, Response | None]:
    """The human in the Board's space, and the not-found page when that is no team."""
    human, session = await require_human(request)
    if human.space_name is None:
        return human, session, not_found(request, session, human)
    return human, session, None


@get("/members", name="members")
async def members_page(request: Request) -> Response:
    human, session, missing = await team_human(request)
    if missing is not None:
        return missing
    members = await runtime(request).store.team_members(human)
    return page(request, "members.html", session=session, human=human, title="Members", active="members",
                members=members, ROLES=ROLES, ROLE_HELP=ROLE_HELP, values={"username": "", "role": "viewer"})


async def team_form(request: Request) -> tuple[Human, object, dict] | Response:
    """A Members form's human, session and fields, or the page that refuses it."""
    human, session, missing = await team_human(request)
    form = await checked_form(request, session)
    if isinstance(form, Response):
        return form
    return missing if missing is not None else (human, session, form)


@post("/members")
async def members_set(request: Request) -> Response:
    """Adds a person with a role, or changes a member's role (the store keeps the last admin)."""
    posted = await team_form(request)
    if isinstance(posted, Response):
        return posted
    human, session, form = posted
    username = str(form.get("username") or "").strip()
    role = str(form.get("role") or "")
    try:
        out = await runtime(request).store.team_member_set(human, username, role)
    except (Invalid, NotFound, Conflict) as e:
        session.set_flash("error", f"Could not set the role: {e.message}.")
        return redirect(request, "/members", session)
    if out["was"] is None:
        said = f"Added {username} to {human.space_name} as {article(out['role'])}."
    elif out["was"] == out["role"]:
        said = f"{username} was already {article(out['role'])} of {human.space_name}."
    else:
        said = f"{username} is now {article(out['role'])} of {human.space_name} (was {out['was']})."
    session.set_flash("success", said)
    return redirect(request, f"/members#member-{quote(username, safe='')}", session)


async def member_of(request: Request, human: Human, username: str) -> dict | None:
    return next((m for m in await runtime(request).store.team_members(human) if m["username"] == username), None)


@get("/members/{username:str}/remove", name="member_remove")
async def member_remove_page(request: Request, username: FromPath[str]) -> Response:
    """Removing a member asks first, as revoking an endpoint does."""
    human, session, missing = await team_human(request)
    if missing is not None:
        return missing
    require_role(human, "admin", "manage this team")
    member = await member_of(request, human, username)
    if member is None:
        return not_found(request, session, human)
    return page(request, "member_remove.html", session=session, human=human, title=f"Remove {username}?",
                active="members", member=member)


@post("/members/{username:str}/remove")
async def member_remove_submit(request: Request, username: FromPath[str]) -> Response:
    posted = await team_form(request)
    if isinstance(posted, Response):
        return posted
    human, session, _ = posted
    try:
        await runtime(request).store.team_member_remove(human, username)
    except (Invalid, NotFound, Conflict) as e:
        session.set_flash("error", f"Could not remove {username}: {e.message}.")
        return redirect(request, "/members", session)
    session.set_flash("success", f"Removed {username} from {human.space_name}.")
    # Removing oneself ends one's access: the next page is one's own space.
    return redirect(request, "/" if username == human.username else "/members", session)


def handlers() -> list:
    return [space_switch, members_page, members_set, member_remove_page, member_remove_submit]
