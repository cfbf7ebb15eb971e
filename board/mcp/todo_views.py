"""Two ways an agent host can show a todo to its human, both drawn from the one todo detail
view (board/view/todo_detail.py) and scoped exactly like get_todo (REQ-10):

- The MCP App (the MCP Apps extension, io.modelcontextprotocol/ui): get_todo, claim and
  claim_next name the ui://switchboard/todo resource in their `_meta.ui.resourceUri`. It is
  one self-contained HTML page (todo_app.html) whose CSP allows nothing outside it. A
  get_todo result sent to a client that negotiated the extension also carries the view in
  its `_meta` (VIEW_KEY), which the page draws; content and structured content are the same
  as for any client, so hosts without MCP Apps see the results they always did.
- The A2UI todo detail resource (SWITCHBOARD_A2UI, off by default): the template
  switchboard://todos/{id}/a2ui, of MIME type application/json+a2ui, whose text is the JSON
  array of the A2UI v0.9 messages for that todo (board/view/a2ui.py).
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from functools import lru_cache
from pathlib import Path

from board.mcp.doorbell import A2UI_SUFFIX, TODO_URI_PREFIX, a2ui_uri  # noqa: F401 (a2ui_uri re-exported)
from board.view import a2ui

EXTENSION_ID = "io.modelcontextprotocol/ui"
APP_URI = "ui://switchboard/todo"
APP_MIME_TYPE = "text/html;profile=mcp-app"
VIEW_KEY = "switchboard/todo_detail"
TOOLS_WITH_APP = frozenset({"get_todo", "claim", "claim_next"})
TOOL_META = {"ui": {"resourceUri": APP_URI}}
# The origins the page may reach, per kind: none at all (it talks to the host by postMessage).
APP_CSP = {"connectDomains": [], "resourceDomains": [], "frameDomains": [], "baseUriDomains": []}
APP_RESOURCE_META = {"ui": {"csp": APP_CSP, "prefersBorder": True}}

A2UI_TEMPLATE = TODO_URI_PREFIX + "{id}" + A2UI_SUFFIX
A2UI_MIME_TYPE = a2ui.MIME_TYPE


def _hash(text: str) -> str:
    return base64.b64encode(hashlib.sha256(text.encode()).digest()).decode()


@lru_cache(maxsize=1)
def app_html() -> str:
    """The page, its Content-Security-Policy naming the hashes of its one script and one style."""
    page = (Path(__file__).resolve().parent / "todo_app.html").read_text(encoding="utf-8")
    script = re.search(r"<script>(.*?)</script>", page, re.S).group(1)
    style = re.search(r"<style>(.*?)</style>", page, re.S).group(1)
    return page.replace("{{SCRIPT_HASH}}", _hash(script)).replace("{{STYLE_HASH}}", _hash(style))


def supports_apps(capabilities) -> bool:
    """Whether the client negotiated MCP Apps (the extension, with the app MIME type)."""
    extensions = getattr(capabilities, "extensions", None) or {}
    settings = extensions.get(EXTENSION_ID)
    mime_types = settings.get("mimeTypes") if isinstance(settings, dict) else None
    return isinstance(mime_types, (list, tuple)) and APP_MIME_TYPE in mime_types


def a2ui_todo_id(uri: str) -> str | None:
    """The todo id of an A2UI resource URI, or None when the URI is not one."""
    if uri.startswith(TODO_URI_PREFIX) and uri.endswith(A2UI_SUFFIX):
        todo_id = uri[len(TODO_URI_PREFIX):-len(A2UI_SUFFIX)]
        return todo_id if todo_id and "/" not in todo_id else None
    return None


def a2ui_text(detail: dict) -> str:
    return json.dumps(a2ui.messages(detail), ensure_ascii=False, separators=(",", ":"))
