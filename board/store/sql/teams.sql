-- Teams, their members and roles, and the record of who did what (board/store/teams.py,
-- migration 0018). A team is a users row of kind 'team' with a space endpoint that owns its
-- todos. Member changes of a team take turns on the team's row (team_lock), so the test that
-- keeps its last admin reads what the change before it committed.

-- name: team_create
-- description: Creates a team (a users row of kind team), its space endpoint, and its owner as its first admin; nothing when the owner is not a person
WITH person AS (
  SELECT id FROM users WHERE username = %(owner)s AND kind = 'person'
),
team AS (
  INSERT INTO users (username, password_hash, kind)
  SELECT %(name)s, '!', 'team' FROM person  -- '!': no password hash matches it, and sign-in reads persons only
  RETURNING id, username
),
space AS (
  INSERT INTO endpoints (user_id, name, agent_id, scope, queues, kind)
  SELECT team.id, team.username, 'team', '{}', '{}', 'team' FROM team
  RETURNING id
),
member AS (
  INSERT INTO team_members (team_id, user_id, role)
  SELECT team.id, person.id, 'admin' FROM team, person
  RETURNING team_id
)
SELECT team.id, team.username AS name, (SELECT id FROM person) AS owner_id, (SELECT count(*) FROM space) AS spaces,
       (SELECT count(*) FROM member) AS members
  FROM team;

-- name: team_by_name
-- description: A team by its name
SELECT id, username AS name FROM users WHERE username = %(name)s AND kind = 'team';

-- name: team_lock
-- description: Locks a team's row for a change of its members (not its key: foreign keys to it still check)
SELECT id FROM users WHERE id = %(team_id)s AND kind = 'team' FOR NO KEY UPDATE;

-- name: team_member_set
-- description: Adds a person to a team with a role, or changes their role; nothing when it would leave the team without an admin or the person does not exist
WITH person AS (
  SELECT id FROM users WHERE username = %(username)s AND kind = 'person'
),
was AS (
  SELECT m.role FROM team_members m, person WHERE m.team_id = %(team_id)s AND m.user_id = person.id
),
other_admins AS (
  SELECT count(*) AS n FROM team_members m
   WHERE m.team_id = %(team_id)s AND m.role = 'admin' AND m.user_id <> ALL(ARRAY(SELECT id FROM person))
),
up AS (
  INSERT INTO team_members AS m (team_id, user_id, role)
  SELECT %(team_id)s, person.id, %(role)s::team_role FROM person
   WHERE %(role)s = 'admin' OR (SELECT n FROM other_admins) > 0
  ON CONFLICT (team_id, user_id) DO UPDATE SET role = excluded.role
  RETURNING m.user_id, m.role::text AS role
)
SELECT (SELECT id FROM person) AS person_id, (SELECT role::text FROM was) AS was, up.role,
       pg_notify('switchboard_v1', json_build_object('kind', 'member_changed', 'team', %(team_id)s::bigint,
                                                     'user', up.user_id, 'role', up.role)::text) AS notice
  FROM (SELECT 1) one LEFT JOIN up ON true;

-- name: team_member_remove
-- description: Removes a person from a team; nothing when they are its last admin or not a member. Every process ends their streams of the team
WITH person AS (
  SELECT id FROM users WHERE username = %(username)s AND kind = 'person'
),
was AS (
  SELECT m.role FROM team_members m, person WHERE m.team_id = %(team_id)s AND m.user_id = person.id
),
other_admins AS (
  SELECT count(*) AS n FROM team_members m
   WHERE m.team_id = %(team_id)s AND m.role = 'admin' AND m.user_id <> ALL(ARRAY(SELECT id FROM person))
),
gone AS (
  DELETE FROM team_members m USING person
   WHERE m.team_id = %(team_id)s AND m.user_id = person.id AND (m.role <> 'admin' OR (SELECT n FROM other_admins) > 0)
  RETURNING m.user_id
)
SELECT (SELECT id FROM person) AS person_id, (SELECT role::text FROM was) AS was, gone.user_id AS removed,
       pg_notify('switchboard_v1', json_build_object('kind', 'member_removed', 'team', %(team_id)s::bigint,
                                                     'user', gone.user_id)::text) AS notice
  FROM (SELECT 1) one LEFT JOIN gone ON true;

-- name: team_members
-- description: A team's members with their roles, admins first
SELECT u.id, u.username, m.role::text AS role, m.added_at
  FROM team_members m JOIN users u ON u.id = m.user_id
 WHERE m.team_id = %(team_id)s
 ORDER BY m.role DESC, u.username;

-- name: teams_all
-- description: Every team with its members (the command line's team list)
SELECT t.id, t.username AS name, t.created_at,
       coalesce((SELECT json_agg(json_build_object('username', u.username, 'role', m.role) ORDER BY m.role DESC, u.username)
                   FROM team_members m JOIN users u ON u.id = m.user_id WHERE m.team_id = t.id), '[]'::json) AS members
  FROM users t WHERE t.kind = 'team'
 ORDER BY t.username;

-- name: spaces_of_person
-- description: The spaces a person may use: their own (as its admin) first, then their teams by name
SELECT u.id, u.username AS name, u.kind, 'admin' AS role FROM users u WHERE u.id = %(person)s AND u.kind = 'person'
UNION ALL
(SELECT t.id, t.username, t.kind, m.role::text
   FROM team_members m JOIN users t ON t.id = m.team_id
  WHERE m.user_id = %(person)s
  ORDER BY t.username);

-- name: space_of_person
-- description: One space as a person may use it (their own, or a team of theirs) with their role; nothing for any other
SELECT u.id, u.username AS name, u.kind, CASE WHEN u.id = %(person)s THEN 'admin' ELSE m.role::text END AS role
  FROM users u LEFT JOIN team_members m ON m.team_id = u.id AND m.user_id = %(person)s
 WHERE u.id = %(space)s AND (u.id = %(person)s OR m.user_id IS NOT NULL);

-- name: todo_space_of_person
-- description: The space of a todo the person may see (their own, or a team of theirs) with their role; nothing for any other todo, as for an id never minted
SELECT u.id, u.username AS name, u.kind, CASE WHEN u.id = %(person)s THEN 'admin' ELSE m.role::text END AS role
  FROM todos t JOIN endpoints e ON e.id = t.endpoint_id JOIN users u ON u.id = e.user_id
  LEFT JOIN team_members m ON m.team_id = u.id AND m.user_id = %(person)s
 WHERE t.id = %(id)s AND (u.id = %(person)s OR m.user_id IS NOT NULL);

-- name: audit_insert
-- description: Records a person's action, a row per todo it changed, in the transaction of the change; watching Boards hear who did it
WITH rec AS (
  INSERT INTO audit_records (space_id, actor_id, actor_name, action, todo_id, queue, detail, source, at)
  SELECT %(space_id)s, %(actor_id)s, %(actor_name)s, %(action)s, x.todo_id, x.queue, %(detail)s,
         %(source)s::audit_source, coalesce(%(now)s::timestamptz, now())
    FROM unnest(%(todo_ids)s::text[], %(queues)s::text[]) AS x (todo_id, queue)
  RETURNING todo_id, queue
)
SELECT count(*) AS n,
       CASE WHEN EXISTS (SELECT FROM watchers w WHERE w.user_id = %(space_id)s)  -- a Board of the space is open
       THEN pg_notify('switchboard_v1', json_build_object(
         'kind', 'activity', 'space', %(space_id)s::bigint, 'actor', %(actor_name)s::text,
         'actor_id', %(actor_id)s::bigint, 'action', %(action)s::text, 'count', count(*),
         'todos', (SELECT json_agg(r.todo_id) FROM (SELECT todo_id FROM rec WHERE todo_id IS NOT NULL LIMIT 20) r),
         'queue', min(queue))::text) END AS notice
  FROM rec;

-- name: audit_list
-- description: A space's records newest first, filtered by person, action, queue and time, after a keyset cursor
SELECT r.id, r.actor_id, r.actor_name, r.action, r.todo_id, r.queue, r.detail, r.source::text AS source, r.at
  FROM audit_records r
 WHERE r.space_id = %(space_id)s
   AND (%(actor)s::text IS NULL OR r.actor_name = %(actor)s)
   AND (%(action)s::text IS NULL OR r.action = %(action)s)
   AND (%(queue)s::text IS NULL OR r.queue = %(queue)s)
   AND (%(since)s::timestamptz IS NULL OR r.at >= %(since)s)
   AND (%(until)s::timestamptz IS NULL OR r.at < %(until)s)
   AND (%(after_at)s::timestamptz IS NULL OR (r.at, r.id) < (%(after_at)s, %(after_id)s::bigint))
 ORDER BY r.at DESC, r.id DESC
 LIMIT %(limit)s;

-- name: audit_of_todo
-- description: A todo's records in its space, oldest first (the drawer)
SELECT r.id, r.actor_id, r.actor_name, r.action, r.detail, r.source::text AS source, r.at
  FROM audit_records r
 WHERE r.todo_id = %(id)s AND r.space_id = %(space_id)s
 ORDER BY r.at, r.id
 LIMIT 200;

-- name: audit_prune
-- description: Deletes a batch of records older than the audit retention
DELETE FROM audit_records
 WHERE id = ANY(ARRAY(SELECT r.id FROM audit_records r
                       WHERE r.at < coalesce(%(now)s::timestamptz, now()) - make_interval(secs => %(retention_seconds)s)
                       ORDER BY r.at LIMIT %(batch)s))
RETURNING id;
