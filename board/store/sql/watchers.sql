-- Presence: the humans each server process has live listeners for (migration 0011's
-- watchers table), so that the statements that move a todo notify only when someone listens.
-- The process's side, and why a listener misses nothing, is board/live/presence.py.

-- name: watchers_hold
-- description: Records or renews the humans a process has live listeners for; says which rows were added rather than renewed
INSERT INTO watchers (user_id, process, expires_at)
SELECT u, %(process)s::uuid, now() + %(ttl_seconds)s * interval '1 second'
  FROM unnest(%(users)s::bigint[]) AS u
    ON CONFLICT (user_id, process) DO UPDATE SET expires_at = EXCLUDED.expires_at
RETURNING user_id, xmax = 0 AS added;

-- name: watchers_drop
-- description: Forgets humans a process no longer has listeners for (all of them when it stops)
DELETE FROM watchers WHERE process = %(process)s::uuid AND user_id = ANY(%(users)s::bigint[])
RETURNING user_id;

-- name: watchers_expire
-- description: Drops the rows of processes that stopped renewing them (stopped, or cut off from the database)
DELETE FROM watchers WHERE expires_at < now()
RETURNING user_id, process;

-- name: watchers_in_flight
-- description: The other transactions that hold watchers' lock now: those that may have checked it without seeing a row just committed
SELECT coalesce(array_agg(DISTINCT l.virtualtransaction), '{}') AS vxids
  FROM pg_locks l
 WHERE l.locktype = 'relation' AND l.mode = 'AccessShareLock'
   AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
   AND l.relation = 'watchers'::regclass AND l.pid IS DISTINCT FROM pg_backend_pid();

-- name: watchers_in_flight_left
-- description: How many of those transactions are still running (each holds the lock on its own virtual transaction id to its end)
SELECT count(*) AS n FROM pg_locks WHERE locktype = 'virtualxid' AND virtualxid = ANY(%(vxids)s::text[]);
