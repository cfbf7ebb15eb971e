"""A bounded fuzz of the A2A JSON-RPC surface at /a2a, over HTTP against a real
`switchboard serve`: Hypothesis draws (derandomized) a method and its params: a valid call
bent one field at a time into a value of another JSON type, a huge or empty string, unknown
fields, task ids of the caller's, another caller's and never minted; or params of any shape.
Every string carries a unique marker.

Checked: no HTTP 5xx and no JSON-RPC internal error (-32603); an error changes nothing (a
checksum of the todos and attempts tables, before and after); and, at the end, no marker
and no token appears in the server's log."""

from __future__ import annotations

import itertools
import uuid

import httpx
import hypothesis.strategies as st

from tests.faults import harness as h

METHODS = ("SendMessage", "SendStreamingMessage", "GetTask", "ListTasks", "CancelTask", "SubscribeToTask",
           "GetExtendedAgentCard", "CreateTaskPushNotificationConfig", "message/send", "tasks/get", "Nope")
_markers = itertools.count()


def marker() -> str:
    return f"zqmark{next(_markers):06d}q"


json_leaf = st.one_of(st.none(), st.booleans(), st.integers(-2**63, 2**63), st.floats(allow_nan=False, allow_infinity=False),
                      st.builds(marker), st.just(""), st.builds(lambda: marker() + "x" * 70000))
json_any = st.recursive(json_leaf, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                           st.dictionaries(st.sampled_from(
                                                               ["queue", "text", "data", "url", "id", "x"]),
                                                               inner, max_size=3)), max_leaves=8)


def message(task: str | None = None) -> dict:
    msg = {"messageId": marker(), "role": "ROLE_USER", "parts": [{"text": marker()}], "metadata": {"queue": "work"}}
    if task is not None:
        msg["taskId"] = task
    return msg


@st.composite
def calls(draw, ids: dict[str, str]):
    method = draw(st.sampled_from(METHODS))
    task = draw(st.sampled_from([ids["mine"], ids["done"], ids["foreign"], str(uuid.uuid4()), marker()]))
    valid = {"SendMessage": {"message": message()}, "SendStreamingMessage": {"message": message(task)},
             "GetTask": {"id": task, "historyLength": 2}, "ListTasks": {"pageSize": 5},
             "CancelTask": {"id": task}, "SubscribeToTask": {"id": task}}.get(method, {"id": task})
    how = draw(st.sampled_from(["valid", "bend", "any"]))
    if how == "any":
        return method, draw(json_any)
    params = dict(valid)
    if how == "bend":
        path = draw(st.sampled_from(["message.parts", "message.metadata", "message.parts.0", "message.role",
                                     "message.taskId", "message.contextId", "id", "historyLength", "pageSize",
                                     "pageToken", "status", "configuration", "extra"]))
        head, _, rest = path.partition(".")
        value = draw(json_any)
        if rest and isinstance(params.get(head), dict):
            inner = dict(params[head])
            if rest.startswith("parts.") and isinstance(inner.get("parts"), list):
                inner["parts"] = [value]
            else:
                inner[rest] = value
            params[head] = inner
        else:
            params[head] = value
    return method, params


async def test_the_a2a_surface_fuzzed_gives_no_5xx_no_internal_error_changes_nothing_on_error_and_logs_no_marker(
        db_url, store, tmp_path):
    team = (await store.team_create(f"fuzz{uuid.uuid4().hex[:6]}",
                                    owner=(await store.user_insert(f"fuzz{uuid.uuid4().hex[:6]}", "x"))["username"]))
    token, agent = await h.vend(store, user_id=team["id"], agent_id="fuzzer")
    other_token, other = await h.vend(store, agent_id="stranger")
    mine = await store.todo_add(agent, queue="work", title="mine", a2a=("fuzzer", "ctx"))
    done = await store.todo_add(agent, queue="work", title="done", a2a=("fuzzer", "ctx"))
    await store.todo_claim(agent, done["id"])
    await store.todo_complete(agent, done["id"], result={"ok": True})
    foreign = await store.todo_add(other, queue="work", title="foreign", a2a=("stranger", "ctx"))
    ids = {"mine": mine["id"], "done": done["id"], "foreign": foreign["id"]}
    failures: list[str] = []
    server = h.ServerProcess(db_url, tmp_path / "server.log", SWITCHBOARD_RATE_LIMIT_PER_SECOND="0")
    await server.start()
    try:
        async with httpx.AsyncClient(base_url=server.url, timeout=httpx.Timeout(30.0, read=5.0),
                                     headers={"Authorization": f"Bearer {token}", "A2A-Version": "1.0"}) as http:
            for method, params in h.drawn(calls(ids), 150):
                before = await h.tables_checksum(db_url)
                body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
                try:
                    # a 0.3 client sends no A2A-Version (the SDK's 0.3 adapter calls a 1.0 header on
                    # a 0.3 method an internal error: a contradiction no client sends)
                    headers = {"A2A-Version": "0.3"} if "/" in method else {}
                    reply = await http.post("/a2a", json=body, headers=headers)
                except httpx.ReadTimeout:  # a stream that stays open: it was accepted
                    continue
                text = reply.text
                if reply.status_code >= 500:
                    failures.append(f"{method}: HTTP {reply.status_code}")
                elif '"code":-32603' in text.replace(" ", ""):
                    failures.append(f"{method}: internal error {text[:300]}")
                elif '"error"' in text and '"result"' not in text and await h.tables_checksum(db_url) != before:
                    failures.append(f"{method}: an error changed the tables")
    finally:
        await server.stop()
    log = server.log_text()
    assert failures == []
    assert "zqmark" not in log and token not in log and other_token not in log
