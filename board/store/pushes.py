"""A2A push notification configs (board/store/sql/pushes.sql), a part of board.store.store.Store:
an A2A caller's configs of the tasks (todos) in its scope. Setting one marks the todo, so
that from then on each of its state changes writes a push to the hook outbox in the
transaction of the change (migration 0021's trigger); board/ops/hooks.py delivers them.

A todo outside the caller's scope is NotFound with the body of a never-minted one (REQ-10).
Reads return id, task id, URL and the authentication's scheme: never the token or the
credentials."""

from __future__ import annotations

from typing import Any

from board.errors import Conflict, NotFound
from board.store.base import StoreBase
from board.store.inputs import checked_todo_id, clean_push_config
from board.store.queries import query
from board.store.vocabulary import PUSH_CONFIGS_MAX, Agent


def _config_out(row: dict) -> dict:
    return {"task_id": row["todo_id"], "id": row["id"], "url": row["url"], "auth_scheme": row["auth_scheme"]}


class Pushes(StoreBase):
    async def push_config_set(self, caller: Agent, todo_id: Any, *, config_id: Any = None, url: Any = None,
                              token: Any = None, auth_scheme: Any = None, auth_credentials: Any = None) -> dict:
        """Adds or replaces (by id; the task's id when none is given) a push config of a todo in
        the caller's scope, and writes the todo's current status to it at once."""
        todo_id = checked_todo_id(todo_id, "push_config_set")
        fields = clean_push_config(config_id, url, token, auth_scheme, auth_credentials)
        row = await self._fetch(query("push_config_set"), self._params(
            caller, todo_id=todo_id, id=fields["id"] or todo_id, url=fields["url"], token=fields["token"],
            auth_scheme=fields["authentication.scheme"], auth_credentials=fields["authentication.credentials"],
            max=PUSH_CONFIGS_MAX), op="push_config_set", todo_id=todo_id, one=True)
        if row is None:
            raise NotFound(op="push_config_set", todo_id=todo_id)
        if row["id"] is None:
            raise Conflict(f"a task has at most {PUSH_CONFIGS_MAX} push notification configs; delete one first",
                           op="push_config_set", todo_id=todo_id)
        return _config_out(row)

    async def push_configs(self, caller: Agent, todo_id: Any, config_id: Any = None) -> list[dict]:
        """A todo's push configs, oldest first (only the one named config_id, when given)."""
        todo_id = checked_todo_id(todo_id, "push_configs")
        rows = await self._fetch(query("push_configs_of_todo"), self._params(
            caller, todo_id=todo_id, id=config_id or None), op="push_configs", todo_id=todo_id)
        if not rows:
            raise NotFound(op="push_configs", todo_id=todo_id)
        return [_config_out(r) for r in rows if r["id"] is not None]

    async def push_config(self, caller: Agent, todo_id: Any, config_id: Any = None) -> dict:
        """One push config of a todo: the one named config_id, or the task's default (its id)."""
        todo_id = checked_todo_id(todo_id, "push_config")
        found = await self.push_configs(caller, todo_id, config_id or todo_id)
        if not found:
            raise NotFound("no push notification config with that id on this task", op="push_config",
                           todo_id=todo_id)
        return found[0]

    async def push_config_delete(self, caller: Agent, todo_id: Any, config_id: Any = None) -> None:
        """Deletes a push config (the task's default when config_id is none); its pushes not
        yet delivered are dropped with it."""
        todo_id = checked_todo_id(todo_id, "push_config_delete")
        row = await self._fetch(query("push_config_delete"), self._params(
            caller, todo_id=todo_id, id=config_id or todo_id), op="push_config_delete", todo_id=todo_id, one=True)
        if row is None:
            raise NotFound(op="push_config_delete", todo_id=todo_id)
        if row["deleted"] == 0:
            raise NotFound("no push notification config with that id on this task", op="push_config_delete",
                           todo_id=todo_id)
