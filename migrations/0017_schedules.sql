-- Schedules: a human's standing order that adds a todo at each tick of a cron expression (in
-- an IANA time zone) or every N seconds.
--
-- The tick is computed in Python (croniter, in the schedule's zone); the database holds when
-- the next tick falls (next_at, UTC). Every server process runs the timer: its sweep locks
-- due schedules FOR UPDATE SKIP LOCKED, adds the todo for the latest tick that has come and
-- advances next_at past now in the same transaction, so however many processes sweep, each
-- tick is taken once, and ticks missed while every process was down add one todo (the
-- latest), not one each. A tick is skipped (and counted) when the schedule's previous todo
-- is still live and overlap is off, or when the human has no live endpoint granted the queue.
--
-- todos.schedule_id (migration 0016) gains its foreign key: a removed schedule leaves the
-- todos it added, no longer naming it.

CREATE TABLE schedules (
  id            uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  user_id       bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  queue         text NOT NULL CHECK (queue ~ '^[A-Za-z0-9_.:-]{1,64}$'),
  title         text NOT NULL CHECK (length(title) BETWEEN 1 AND 500),
  payload       jsonb NOT NULL DEFAULT '{}'::jsonb CHECK (jsonb_typeof(payload) = 'object'),
  priority      smallint NOT NULL DEFAULT 2 CHECK (priority BETWEEN 0 AND 4),
  max_attempts  integer NOT NULL DEFAULT 5 CHECK (max_attempts BETWEEN 1 AND 1000),
  cron          text CHECK (char_length(cron) BETWEEN 1 AND 200),
  every_seconds integer CHECK (every_seconds >= 1),
  timezone      text NOT NULL DEFAULT 'UTC' CHECK (char_length(timezone) BETWEEN 1 AND 64),
  overlap       boolean NOT NULL DEFAULT false,
  paused        boolean NOT NULL DEFAULT false,
  next_at       timestamptz NOT NULL,  -- the next tick (UTC)
  last_tick_at  timestamptz,           -- the latest tick taken (added or skipped)
  ticks_added   bigint NOT NULL DEFAULT 0,
  ticks_skipped bigint NOT NULL DEFAULT 0,
  created_at    timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT schedules_when_check CHECK ((cron IS NULL) <> (every_seconds IS NULL))
);
-- The timer's next due schedule, and its batch of due ones.
CREATE INDEX schedules_due_idx ON schedules (next_at) WHERE NOT paused;
CREATE INDEX schedules_user_idx ON schedules (user_id, created_at);

ALTER TABLE todos ADD CONSTRAINT todos_schedule_id_fkey
  FOREIGN KEY (schedule_id) REFERENCES schedules (id) ON DELETE SET NULL;
