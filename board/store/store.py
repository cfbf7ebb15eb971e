"""The one transactional store, the `Store` every surface calls: it runs every statement that
reads or changes todos, attempts, users and endpoints (board/store/sql/*.sql, loaded by
board/store/queries.py; input shaping is board/store/inputs.py). Each part is a module of
its own over the plumbing of board/store/base.py, named after the statement file it runs:

- adds.py (sql/adds.sql), claims.py (claims.sql), closes.py (closes.sql), holds.py
  (holds.sql), reads.py (reads.sql), deletes.py (deletes.sql, and the Board's bulk actions),
  sweeps.py (sweeps.sql, the hook outbox included), watchers.py (watchers.sql), queues.py
  (board.sql: pauses, the overview, the counts), schedule.py (schedule.sql: due todos,
  priorities, queue limits), plans.py (plans.sql: dependencies dropped, waiting counts), recurring.py (recurring.sql:
  schedules that add todos, and their timer's sweep);
- traces.py (traces.sql: what a closed attempt's span carries, read only with tracing on);
- accounts.py (accounts.sql: users, endpoints), grants.py (oauth.sql: OAuth grants) and teams.py
  (teams.sql: teams, members, the record of people's actions);
- pushes.py (pushes.sql: A2A push notification configs).

Nothing outside the store catches psycopg errors (base.py's _translate is the one place a
driver error becomes a domain error).
"""

from __future__ import annotations

from board.store.accounts import Accounts
from board.store.adds import Adds
from board.store.base import PausedQueues, StoreBase, call_deadline, deadline_after, todo_out
from board.store.claims import Claims
from board.store.closes import Closes
from board.store.deletes import Deletes
from board.store.grants import Grants
from board.store.holds import Holds
from board.store.inputs import hash_token
from board.store.plans import Plans
from board.store.pushes import Pushes
from board.store.queues import Queues
from board.store.reads import Reads
from board.store.recurring import Recurring
from board.store.schedule import Schedule
from board.store.sweeps import Sweeps
from board.store.teams import Teams
from board.store.traces import Traces
from board.store.vocabulary import Agent, Caller, Human, Observer, Transition
from board.store.watchers import Watchers

# What the surfaces take from here besides the Store (the callers, a transition, the call's deadline).
__all__ = ["Agent", "Caller", "Human", "Observer", "PausedQueues", "Store", "Transition", "call_deadline",
           "deadline_after", "hash_token", "todo_out"]


class Store(Adds, Claims, Closes, Holds, Reads, Deletes, Sweeps, Watchers, Queues, Schedule, Plans, Recurring, Teams, Accounts, Grants,
            Traces, Pushes, StoreBase):
    """The store: its pool and settings (StoreBase's fields), every verb of its parts."""
