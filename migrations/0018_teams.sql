-- Teams: several people share one space of work, each with a role, and every human action is
-- recorded with who did it.
--
-- A space is a users row. A person's row is their personal space, as before; a team is a
-- users row of kind 'team', which nobody signs in as. Everything already keyed by a space's
-- user (endpoints, queue pauses and limits, schedules, watchers) works for a team as it does
-- for a person, with no second code path.
--
-- A team's todos all belong to one endpoint, the team's space endpoint (kind 'team', no
-- token), so the claim keeps reading one range of todos_ready_idx. Each endpoint of the team
-- names it in space_id, and its calls act in that endpoint's todos: every endpoint of the
-- team reads and claims the team's todos in its granted queues (REQ-10's widening under
-- SPEC-0033). A personal endpoint has no space_id and keeps REQ-10's per-endpoint scope.
-- An attempt still names the endpoint that claimed (claimer_endpoint_id).

ALTER TABLE users ADD COLUMN kind text NOT NULL DEFAULT 'person' CHECK (kind IN ('person', 'team'));

CREATE TYPE team_role AS ENUM ('viewer', 'operator', 'admin');

CREATE TABLE team_members (
  team_id  bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  user_id  bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  role     team_role NOT NULL,
  added_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (team_id, user_id)
);
-- A person's teams (the space switcher, every by-id page's membership test).
CREATE INDEX team_members_user_idx ON team_members (user_id, team_id);

ALTER TABLE endpoints ADD COLUMN space_id uuid REFERENCES endpoints (id);
-- The space endpoint is a third kind: no token, no client.
ALTER TABLE endpoints DROP CONSTRAINT endpoints_kind_check;
ALTER TABLE endpoints ADD CONSTRAINT endpoints_kind_check CHECK (
  (kind = 'vended' AND token_hash IS NOT NULL AND client_id IS NULL)
  OR (kind = 'oauth' AND token_hash IS NULL AND client_id IS NOT NULL AND client_name IS NOT NULL)
  OR (kind = 'team' AND token_hash IS NULL AND client_id IS NULL AND space_id IS NULL));
-- It is granted no queue: no add through a person's endpoints picks it.
ALTER TABLE endpoints DROP CONSTRAINT endpoints_queues_check;
ALTER TABLE endpoints ADD CONSTRAINT endpoints_queues_check CHECK (cardinality(queues) > 0 OR kind = 'team');
-- One space endpoint per team.
CREATE UNIQUE INDEX endpoints_team_space ON endpoints (user_id) WHERE kind = 'team';

-- The record of human actions. Written in the transaction of the change it records; never
-- for a refused or missed action; never holding a token, a summary or an artifact. It
-- outlives the todo it names (no foreign key) and keeps the actor's name if they are gone.
CREATE TYPE audit_source AS ENUM ('board', 'cli');

CREATE TABLE audit_records (
  id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  space_id   bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  actor_id   bigint REFERENCES users (id) ON DELETE SET NULL,
  actor_name text,  -- null: the command line, acting as no one
  action     text NOT NULL CHECK (action ~ '^[a-z_]{1,40}$'),
  todo_id    text COLLATE "C",
  queue      text,
  detail     jsonb NOT NULL DEFAULT '{}'::jsonb CHECK (jsonb_typeof(detail) = 'object'),
  source     audit_source NOT NULL,
  at         timestamptz NOT NULL DEFAULT now()
);
-- The Activity page: a space's records newest first.
CREATE INDEX audit_records_space_idx ON audit_records (space_id, at DESC, id DESC);
-- The drawer: a todo's records.
CREATE INDEX audit_records_todo_idx ON audit_records (todo_id, at) WHERE todo_id IS NOT NULL;
-- Retention.
CREATE INDEX audit_records_at_idx ON audit_records (at);
