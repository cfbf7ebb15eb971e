"""The todo detail as A2UI v0.9 messages (a2ui.org), for the A2UI todo detail resource
(board/mcp/server.py, behind SWITCHBOARD_A2UI). A host draws them with its own components
from the basic catalog; no HTML of ours reaches it.

Three messages: createSurface, updateComponents (the component tree) and updateDataModel
(the whole data model: {"todo": todo_detail(...)}). The tree is the same for every todo and
every state of it: what is shown or not is a list of zero or one entries in the data,
expanded by a templated List, so a change is carried by updateDataModel alone. The summary,
notes and titles are bound as data to Text components, which the basic catalog renders as
text (markdown without HTML at most), never as markup.
"""

from __future__ import annotations

BASIC_CATALOG = "https://a2ui.org/specification/v0_9/catalogs/basic/catalog.json"
VERSION = "v0.9"
MIME_TYPE = "application/json+a2ui"


def surface_id(todo_id: str) -> str:
    return f"switchboard-todo-{todo_id}"


def _text(cid: str, path: str, variant: str | None = None, label: str | None = None) -> dict:
    out = {"id": cid, "component": "Text", "text": {"path": path}}
    if variant:
        out["variant"] = variant
    if label:
        out["accessibility"] = {"label": label}
    return out


def _list(cid: str, template: str, path: str) -> dict:
    return {"id": cid, "component": "List", "children": {"componentId": template, "path": path}}


def _column(cid: str, children: list[str]) -> dict:
    return {"id": cid, "component": "Column", "children": children}


def _row(cid: str, children: list[str]) -> dict:
    return {"id": cid, "component": "Row", "children": children}


# Paths inside a template are relative to the list item; others start at the data model's root.
COMPONENTS: list[dict] = [
    _column("root", ["todo-title", "todo-waiting", "todo-facts", "todo-current", "attempts-heading", "attempts-count",
                     "attempts-list", "chain-list"]),
    _text("todo-title", "/todo/title", "h2"),
    # While the todo waits for a person: what for, and the question with its answers, first.
    _list("todo-waiting", "waiting-body", "/todo/waiting"),
    _column("waiting-body", ["waiting-heading", "waiting-question"]),
    _text("waiting-heading", "heading", "h3"),
    _list("waiting-question", "waiting-question-lines", "question"),
    _list("waiting-question-lines", "waiting-question-line", "lines"),
    _text("waiting-question-line", "text"),
    _list("todo-facts", "fact-row", "/todo/facts"),
    _row("fact-row", ["fact-label", "fact-value"]),
    _text("fact-label", "label", "h5"),
    _text("fact-value", "value"),
    _list("todo-current", "current-text", "/todo/current"),
    _text("current-text", "text"),
    {"id": "attempts-heading", "component": "Text", "text": "Attempts", "variant": "h3"},
    _text("attempts-count", "/todo/attempts_count_text"),
    _list("attempts-list", "attempt-card", "/todo/attempts"),
    {"id": "attempt-card", "component": "Card", "child": "attempt-body"},
    _column("attempt-body", ["attempt-sentence", "attempt-died", "attempt-summary-label", "attempt-summary",
                             "attempt-truncated", "attempt-facts", "attempt-artifact-label", "attempt-artifact",
                             "attempt-question", "attempt-notes-heading", "attempt-notes"]),
    _text("attempt-sentence", "sentence", "h4"),
    _list("attempt-died", "died-marker", "died_marker"),
    _text("died-marker", "label", label="died: no report"),
    {"id": "attempt-summary-label", "component": "Text", "text": "Summary", "variant": "h5"},
    _text("attempt-summary", "summary_text"),
    _list("attempt-truncated", "truncated-mark", "truncated_mark"),
    _text("truncated-mark", "text", "caption"),
    _list("attempt-facts", "attempt-fact-row", "facts"),
    _row("attempt-fact-row", ["attempt-fact-label", "attempt-fact-value"]),
    _text("attempt-fact-label", "label", "h5"),
    _text("attempt-fact-value", "value"),
    {"id": "attempt-artifact-label", "component": "Text", "text": "Artifact", "variant": "h5"},
    # Every artifact is text here: v0.9's openUrl takes a literal URL, which a templated (stable) tree
    # cannot bind per attempt; the drawer and the MCP App link an https one.
    _text("attempt-artifact", "artifact_words"),
    _list("attempt-question", "attempt-question-body", "question"),
    _column("attempt-question-body", ["attempt-question-heading", "attempt-question-lines"]),
    {"id": "attempt-question-heading", "component": "Text", "text": "Question", "variant": "h5"},
    _list("attempt-question-lines", "attempt-question-line", "lines"),
    _text("attempt-question-line", "text"),
    _text("attempt-notes-heading", "notes_heading", "h5"),
    _list("attempt-notes", "note-row", "notes"),
    _column("note-row", ["note-meta", "note-text"]),
    _text("note-meta", "byline", "caption"),  # who, what kind in words, when: "ada answered, 2026-..."
    _text("note-text", "text"),
    _list("chain-list", "chain-row", "/todo/chain"),
    _column("chain-row", ["chain-title", "chain-state"]),
    _text("chain-title", "title"),
    _text("chain-state", "state_text", "caption"),
]


def data_model(detail: dict) -> dict:
    """The surface's whole data model: the todo detail view, as it is."""
    return {"todo": detail}


def messages(detail: dict) -> list[dict]:
    """The A2UI messages that draw one todo's detail view."""
    sid = surface_id(detail["id"])
    return [
        {"version": VERSION, "createSurface": {"surfaceId": sid, "catalogId": BASIC_CATALOG}},
        {"version": VERSION, "updateComponents": {"surfaceId": sid, "components": COMPONENTS}},
        {"version": VERSION, "updateDataModel": {"surfaceId": sid, "path": "/", "value": data_model(detail)}},
    ]
