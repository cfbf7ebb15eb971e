"""The holds (board/store/sql/holds.sql), a part of board.store.store.Store: what a holder
does while it holds a todo (heartbeat, note, interrupt with a question, resume) and its
owning human's answer."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from psycopg.types.json import Jsonb

from board.errors import Conflict, Invalid
from board.store.base import StoreBase, acts, todo_out
from board.store.inputs import answer_fence, checked_todo_id, clean_choice, clean_note, clean_question
from board.store.queries import query
from board.store.vocabulary import HOLDER_STATES, INTERRUPT_STATES, NOTE_MAX_BYTES, Agent, Caller, Human, Transition

class Holds(StoreBase):
    async def todo_heartbeat(self, caller: Agent, todo_id: Any, *, lease_token=None, lease_seconds=None,
                             now=None) -> dict:
        """claimed -> claimed with the lease extended, on the todo and its attempt (REQ-4)."""
        caller.require("heartbeat")
        todo_id = checked_todo_id(todo_id)
        params = self._params(caller, id=todo_id, lease_seconds=self._lease(lease_seconds), now=now,
                              from_states=["claimed"])
        row = await self._fenced(caller, query("todo_heartbeat"), params, lease_token,
                                 op="heartbeat", todo_id=todo_id, from_states=["claimed"])
        if row is None:
            raise await self._classify(caller, todo_id, "heartbeat", params)
        self._emit([Transition("lease_extended", row["id"], str(row["endpoint_id"]), row["queue"], row["state"],
                               attempts_total=row["attempts_total"])])
        return todo_out(row)

    @acts("note")
    async def todo_note(self, caller: Caller, todo_id: Any, *, text: Any, lease_token: Any = None,
                        now: datetime | None = None) -> dict:
        """held -> held: a note appended to the open attempt (the lease is not extended; the
        note is activity for liveness). An agent notes on its own attempt, fenced as heartbeat
        is (REQ-6); the owning human on any open attempt of theirs (author_kind owner). Past
        the per-attempt cap the oldest notes are deleted and counted, in the same statement."""
        agent = isinstance(caller, Agent)
        if agent:
            caller.require("note")
        todo_id = checked_todo_id(todo_id)
        try:
            text, truncated = clean_note(text, NOTE_MAX_BYTES)
        except Invalid as e:
            e.op, e.todo_id = "note", todo_id
            raise
        params = self._params(caller, id=todo_id, text=text, truncated=truncated, now=now,
                              notes_max=max(1, int(self.settings.attempt_notes_max)),
                              from_states=list(HOLDER_STATES))
        if agent:
            row = await self._fenced(caller, query("attempt_note_add"), params, lease_token, op="note",
                                     todo_id=todo_id, from_states=HOLDER_STATES)
        else:
            row = await self._fetch(query("attempt_note_add"), dict(params, token_checked=False), op="note",
                                    todo_id=todo_id, one=True)
        if row is None:
            raise await self._classify(caller, todo_id, "note", params)
        return {"id": row["id"], "attempt_seq": row["seq"], "notes_count": row["notes_count"],
                "notes_pruned": row["notes_pruned"],
                "note": {"at": row["at"], "text": text, "truncated": truncated,
                         "author_kind": "endpoint" if agent else "owner", "kind": "working"}}

    async def todo_interrupt(self, caller: Agent, todo_id: Any, *, state: Any = "input_required", lease_token=None,
                             question: Any = None, choices: Any = None, expires_in_seconds: Any = None,
                             now=None) -> dict:
        """claimed -> input_required | auth_required; the attempt stays open (REQ-2). A
        question (with choices and an expiry) is written on the attempt as a note of kind
        question in the same statement, with the hook event that asks for a person."""
        caller.require("interrupt")
        todo_id = checked_todo_id(todo_id)
        if state not in INTERRUPT_STATES:
            raise Invalid("state must be input_required or auth_required", argument="state", op="interrupt")
        try:
            asked = clean_question(question, choices, expires_in_seconds)
        except Invalid as e:
            e.op, e.todo_id = "interrupt", todo_id
            raise
        if asked["choices"] is not None:
            asked["choices"] = Jsonb(asked["choices"])
        params = self._params(caller, id=todo_id, from_states=["claimed"], to_state=state, now=now,
                              public_url=self.settings.public_url, **asked)
        row = await self._fenced(caller, query("todo_interrupt"), params, lease_token,
                                 op="interrupt", todo_id=todo_id, from_states=["claimed"])
        if row is None:
            raise await self._classify(caller, todo_id, "interrupt", params)
        self._emit([Transition("interrupted", row["id"], str(row["endpoint_id"]), row["queue"], row["state"],
                               attempts_total=row["attempts_total"])])
        out = todo_out(row)
        if asked["question"] is not None:
            out["question"] = {"text": asked["question"], "truncated": asked["question_truncated"],
                               "choices": choices and list(asked["choices"].obj),
                               "expires_at": row["question_expires_at"]}
        return out

    async def todo_resume(self, caller: Agent, todo_id: Any, *, lease_token=None, lease_seconds=None,
                          now=None) -> dict:
        """input_required | auth_required -> claimed with a fresh lease; the same attempt.
        Returns the answers given since the interrupt (answers: text, choice, who, at)."""
        caller.require("resume")
        todo_id = checked_todo_id(todo_id)
        params = self._params(caller, id=todo_id, from_states=list(INTERRUPT_STATES), to_state="claimed",
                              lease_seconds=self._lease(lease_seconds), now=now)
        row = await self._fenced(caller, query("todo_resume"), params, lease_token,
                                 op="resume", todo_id=todo_id, from_states=INTERRUPT_STATES)
        if row is None:
            raise await self._classify(caller, todo_id, "resume", params)
        self._emit([Transition("resumed", row["id"], str(row["endpoint_id"]), row["queue"], row["state"],
                               attempts_total=row["attempts_total"])])
        seq, after, upto = row.pop("seq"), row.pop("waiting_n"), row.pop("notes_count")
        answers = [] if after is None or not upto else await self._fetch(
            query("attempt_answers"), {"id": todo_id, "seq": seq, "after": after, "upto": upto}, op="resume",
            todo_id=todo_id)
        out = todo_out(row)
        out["answers"] = [dict(a) for a in answers]
        return out

    @acts("answer", detail=("choice",))
    async def todo_answer(self, caller: Human | Agent, todo_id: Any, *, text: Any = None, choice: Any = None,
                          asked: Any = None, now: datetime | None = None) -> dict:
        """The owning human answers an interrupted todo: a note of kind answer on its open
        attempt (text, or one of the question's choices, or both), written only while the
        todo is still interrupted and, with asked (the question key the answer was given for,
        "" for none), only while that question is the one waiting. The holder gets a fresh
        lease to resume in; its sessions are rung. Refused: a todo no longer interrupted
        (Conflict), another question waiting than the one answered (Conflict naming asked), a
        choice the question does not offer (Invalid), a todo not the human's (NotFound).
        An agent that may add todos answers its own todos the same way (an A2A client
        answering its task's question); it is named as who answered by its agent id."""
        if isinstance(caller, Agent):
            caller.require("add_todo")
        who = caller.username if isinstance(caller, Human) else caller.agent_id
        todo_id = checked_todo_id(todo_id)
        try:
            fenced, asked_at = answer_fence(asked)
            if choice is not None:
                if not isinstance(choice, str):
                    raise Invalid("choice must be a string", argument="choice")
                choice = clean_choice(choice)
            if text is None or (isinstance(text, str) and not text.strip() and choice is not None):
                if choice is None:
                    raise Invalid("an answer needs text or a choice", argument="text")
                text = choice
            text, truncated = clean_note(text, NOTE_MAX_BYTES)
        except Invalid as e:
            e.op, e.todo_id = "answer", todo_id
            raise
        params = self._params(caller, id=todo_id, text=text, truncated=truncated, choice=choice, now=now,
                              username=who, lease_seconds=float(self.settings.lease_seconds),
                              from_states=list(INTERRUPT_STATES), fenced=fenced, asked_at=asked_at)
        row = await self._fetch(query("todo_answer_human"), params, op="answer", todo_id=todo_id, one=True)
        if row is None:
            if choice is not None or fenced:
                waiting = await self._fetch(query("todo_answer_choices"), params, op="answer", todo_id=todo_id,
                                            one=True)
                if waiting is not None and fenced and waiting["asked_at"] != asked_at:
                    raise Conflict("the agent asked something else since this answer was written: read the "
                                   "question waiting now and answer that", argument="asked", op="answer",
                                   todo_id=todo_id)
                if waiting is not None and choice is not None:
                    offered = waiting["choices"]
                    if not offered:
                        raise Invalid("this question offers no choices; answer with text", argument="choice",
                                      op="answer", todo_id=todo_id)
                    raise Invalid("choice must be one of the question's choices: " + ", ".join(offered),
                                  argument="choice", op="answer", todo_id=todo_id)
            raise await self._classify(caller, todo_id, "answer", params)
        waited = (row["at"] - row["asked_at"]).total_seconds() if row["first"] and row["asked_at"] else None
        self._emit([Transition("answered", row["id"], str(row["endpoint_id"]), row["queue"], row["state"],
                               attempts_total=row["seq"], waited_seconds=waited)])
        return {"id": row["id"], "attempt_seq": row["seq"],
                "answer": {"n": row["n"], "at": row["at"], "text": text, "truncated": truncated, "choice": choice,
                           "who": who}}
