-- Who listens, so that a transition notifies only when someone does. A notifying
-- transaction's commit takes a lock that every other notifying commit in the cluster waits
-- on (it is held across the WAL flush), so a pg_notify nobody hears still serialises the
-- writers. Most of the time no Board watches a given human's todos and no MCP session of
-- theirs is listening for rings.
--
-- A server process records each human it has a live listener for (a Board stream, an MCP
-- doorway of one of their endpoints): one row per (human, process), renewed by the
-- process's heartbeat and dropped when its last listener closes. The statements that move
-- a todo call pg_notify only when its endpoint's human has a row here; the endpoint and
-- queue notifications the caches depend on (endpoint_revoked, queue_paused, queue_resumed)
-- are always sent.
--
-- Missing nothing: the check is written into each statement, so the statement locks this
-- table (AccessShareLock, held to its transaction's end) while it is planned, before it
-- takes its snapshot. A process that adds a row commits it, then waits until every
-- transaction holding that lock at that moment has ended (watchers_in_flight), and only
-- then reads its listener's snapshot. A transaction that checked before the row was
-- committed has ended, so the snapshot sees its change; one that checks later sees the row
-- and notifies. board/live/presence.py holds the process's side.
--
-- A row of a process that died stays until its expires_at has passed and a sweep drops it:
-- until then its human's transitions notify for nobody, which costs time, never a change.

CREATE TABLE watchers (
  user_id bigint NOT NULL,
  process uuid NOT NULL,
  expires_at timestamptz NOT NULL,
  PRIMARY KEY (user_id, process)
);
