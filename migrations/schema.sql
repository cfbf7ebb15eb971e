-- The schema the migrations build, as pg_dump --schema-only prints it (without comments and
-- SET lines), so a review sees every change to it. Not applied by anything: the migrations
-- are. tests/integration/test_migrations.py fails when the two differ; after a deliberate
-- change, write this file anew with `python -m tests.integration.test_migrations`.

CREATE DOMAIN public.attempt_artifact AS text
	CONSTRAINT attempt_artifact_check CHECK ((octet_length(VALUE) <= 512));
CREATE DOMAIN public.attempt_choice AS text
	CONSTRAINT attempt_choice_check CHECK (((octet_length(VALUE) >= 1) AND (octet_length(VALUE) <= 200)));
CREATE DOMAIN public.attempt_claimant AS text
	CONSTRAINT attempt_claimant_check CHECK ((octet_length(VALUE) <= 128));
CREATE TYPE public.attempt_claimer_kind AS ENUM (
    'endpoint',
    'owner',
    'system'
);
CREATE DOMAIN public.attempt_cost_usd AS numeric(18,6)
	CONSTRAINT attempt_cost_usd_check CHECK (((VALUE >= (0)::numeric) AND (VALUE <= (1000000000)::numeric)));
CREATE TYPE public.attempt_disposition AS ENUM (
    'done',
    'retry_scheduled',
    'dead_lettered',
    'requeued',
    'canceled'
);
CREATE DOMAIN public.attempt_model AS text
	CONSTRAINT attempt_model_check CHECK (((octet_length(VALUE) >= 1) AND (octet_length(VALUE) <= 128)));
CREATE TYPE public.attempt_note_kind AS ENUM (
    'working',
    'question',
    'answer',
    'expired'
);
CREATE DOMAIN public.attempt_note_text AS text
	CONSTRAINT attempt_note_text_check CHECK (((octet_length(VALUE) >= 1) AND (octet_length(VALUE) <= 2048)));
CREATE DOMAIN public.attempt_number AS integer
	CONSTRAINT attempt_number_check CHECK ((VALUE >= 1));
CREATE TYPE public.attempt_outcome AS ENUM (
    'completed',
    'failed',
    'released',
    'lease_expired',
    'reaped',
    'canceled',
    'revoked'
);
CREATE DOMAIN public.attempt_summary AS text
	CONSTRAINT attempt_summary_check CHECK ((octet_length(VALUE) <= 2048));
CREATE DOMAIN public.attempt_tokens AS bigint
	CONSTRAINT attempt_tokens_check CHECK (((VALUE >= 0) AND (VALUE <= '1000000000000'::bigint)));
CREATE TYPE public.audit_source AS ENUM (
    'board',
    'cli'
);
CREATE DOMAIN public.lease_token_sha256 AS bytea
	CONSTRAINT lease_token_sha256_check CHECK ((length(VALUE) = 32));
CREATE TYPE public.team_role AS ENUM (
    'viewer',
    'operator',
    'admin'
);
CREATE TYPE public.todo_count_kind AS ENUM (
    'all',
    'canceled',
    'dead'
);
CREATE TYPE public.todo_state AS ENUM (
    'pending',
    'claimed',
    'input_required',
    'auth_required',
    'done',
    'failed',
    'canceled'
);
CREATE FUNCTION public.a2a_push_message(todo_id text, payload jsonb) RETURNS jsonb
    LANGUAGE sql STABLE
    AS $_$
  SELECT CASE
    WHEN $2::jsonb->'todo'->>'state' = 'input_required' THEN
      (SELECT jsonb_build_object('question', jsonb_build_object('seq', a.seq, 'text', q.text, 'choices', q.choices,
                                                                'asked_at', q.at))
         FROM attempts a JOIN attempt_notes q ON q.todo_id = a.todo_id AND q.seq = a.seq AND q.n = a.asked_n
        WHERE a.todo_id = $1 AND a.seq = ($2::jsonb->'todo'->>'attempts_total')::integer)
    WHEN ($2::jsonb->'todo'->>'dead_letter')::boolean THEN
      (SELECT jsonb_build_object('summary', a.summary) FROM attempts a
        WHERE a.todo_id = $1 AND a.seq = ($2::jsonb->'todo'->>'attempts_total')::integer)
  END
$_$;
CREATE TABLE public.todos (
    id text DEFAULT (gen_random_uuid())::text NOT NULL COLLATE pg_catalog."C",
    endpoint_id uuid NOT NULL,
    queue text NOT NULL,
    title text NOT NULL,
    payload jsonb DEFAULT '{}'::jsonb NOT NULL,
    routing jsonb DEFAULT '{}'::jsonb NOT NULL,
    state public.todo_state DEFAULT 'pending'::public.todo_state NOT NULL,
    owner text,
    lease_expires_at timestamp with time zone,
    attempt integer DEFAULT 0 NOT NULL,
    max_attempts integer DEFAULT 5 NOT NULL,
    result jsonb,
    next_retry_at timestamp with time zone,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    attempts_total integer DEFAULT 0 NOT NULL,
    attempts_pruned integer DEFAULT 0 NOT NULL,
    pruned_outcomes jsonb DEFAULT '{}'::jsonb NOT NULL,
    continues_id text COLLATE pg_catalog."C",
    pruned_usage jsonb,
    priority smallint DEFAULT 2 NOT NULL,
    run_at timestamp with time zone,
    scheduled boolean DEFAULT false NOT NULL,
    key text COLLATE pg_catalog."C",
    waits smallint DEFAULT 0 NOT NULL,
    after text[],
    waited_on boolean DEFAULT false NOT NULL,
    schedule_id uuid,
    a2a_client text,
    a2a_context text,
    a2a_push boolean DEFAULT false NOT NULL,
    CONSTRAINT todos_a2a_check CHECK ((((a2a_client IS NULL) = (a2a_context IS NULL)) AND (length(a2a_client) <= 128) AND (length(a2a_context) <= 256))),
    CONSTRAINT todos_key_check CHECK (((octet_length(key) >= 1) AND (octet_length(key) <= 200))),
    CONSTRAINT todos_priority_check CHECK (((priority >= 0) AND (priority <= 4))),
    CONSTRAINT todos_scheduled_pending CHECK (((NOT scheduled) OR ((state = 'pending'::public.todo_state) AND (run_at IS NOT NULL)))),
    CONSTRAINT todos_waits_check CHECK ((waits >= 0))
);
CREATE FUNCTION public.a2a_push_payload(t public.todos, at timestamp with time zone) RETURNS jsonb
    LANGUAGE sql STABLE
    AS $$
  SELECT jsonb_build_object('occurred_at', at, 'todo', jsonb_build_object(
    'id', t.id, 'state', t.state, 'dead_letter', t.state = 'failed' AND t.next_retry_at IS NULL,
    'attempts_total', t.attempts_total, 'context_id', t.a2a_context))
$$;
CREATE FUNCTION public.attempt_died(outcome public.attempt_outcome) RETURNS boolean
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$
  SELECT coalesce(outcome IN ('lease_expired', 'reaped'), false)
$$;
CREATE FUNCTION public.attempt_notes_newest(todo_id text, seq integer, n integer) RETURNS json
    LANGUAGE sql STABLE PARALLEL SAFE
    AS $_$
  SELECT coalesce(json_agg((jsonb_build_object('at', x.at, 'text', x.text, 'truncated', x.truncated,
                                               'author_kind', x.author_kind, 'kind', x.kind)
      || CASE x.kind WHEN 'question' THEN jsonb_build_object('choices', x.choices, 'expires_at', x.expires_at)
                     WHEN 'answer' THEN jsonb_build_object('choice', x.choice, 'who', x.author)
                     ELSE '{}'::jsonb END)::json ORDER BY x.n DESC), '[]'::json)
    FROM (SELECT w.n, w.at, w.text, w.truncated, w.author_kind, w.kind, w.choices, w.expires_at, w.choice, w.author
            FROM attempt_notes w
           WHERE w.todo_id = $1 AND w.seq = $2 ORDER BY w.n DESC LIMIT $3) x
$_$;
CREATE FUNCTION public.attempt_notes_pruned(todo_id text, seq integer, count integer, max integer, waiting_n integer) RETURNS integer
    LANGUAGE sql STABLE PARALLEL SAFE
    AS $_$
  SELECT greatest($3::integer - $4::integer, 0) - CASE WHEN $5 IS NULL OR $3::integer <= $4::integer THEN 0 ELSE
    (SELECT count(*)::integer FROM attempt_notes x
      WHERE x.todo_id = $1 AND x.seq = $2 AND x.n <= $3::integer - $4::integer AND x.kind <> 'working') END
$_$;
CREATE FUNCTION public.attempt_prior(todo_id text, n integer) RETURNS json
    LANGUAGE sql STABLE PARALLEL SAFE
    AS $_$
  SELECT coalesce(json_agg(x.j ORDER BY x.seq DESC), '[]'::json)
    FROM (SELECT a.seq, attempt_public_notes(a, 3) AS j FROM attempts a
           WHERE a.todo_id = $1 AND a.ended_at IS NOT NULL ORDER BY a.seq DESC LIMIT $2) x
$_$;
CREATE FUNCTION public.attempt_prior(todo_id text, n integer, notes integer) RETURNS json
    LANGUAGE sql STABLE PARALLEL SAFE
    AS $_$
  SELECT coalesce(json_agg(x.j ORDER BY x.seq DESC), '[]'::json)
    FROM (SELECT a.seq, attempt_public_notes(a, $3) AS j FROM attempts a
           WHERE a.todo_id = $1 AND a.ended_at IS NOT NULL ORDER BY a.seq DESC LIMIT $2) x
$_$;
CREATE TABLE public.attempts (
    todo_id text NOT NULL COLLATE pg_catalog."C",
    seq public.attempt_number NOT NULL,
    attempt public.attempt_number NOT NULL,
    claimer_kind public.attempt_claimer_kind NOT NULL,
    claimer_endpoint_id uuid,
    claimer_session text,
    owner text NOT NULL,
    claimant public.attempt_claimant,
    claimed_at timestamp with time zone NOT NULL,
    last_heartbeat_at timestamp with time zone,
    lease_expires_at timestamp with time zone NOT NULL,
    ended_at timestamp with time zone,
    outcome public.attempt_outcome,
    disposition public.attempt_disposition,
    summary public.attempt_summary,
    summary_truncated boolean DEFAULT false NOT NULL,
    artifact public.attempt_artifact,
    lease_token_hash public.lease_token_sha256,
    notes_count integer,
    notes_pruned integer,
    last_note_at timestamp with time zone,
    input_tokens bigint,
    output_tokens bigint,
    cost_usd numeric(18,6),
    model text,
    waiting_n integer,
    asked_n integer,
    answered_at timestamp with time zone,
    question_expires_at timestamp with time zone,
    claim_traceparent text,
    CONSTRAINT attempts_claim_traceparent_w3c CHECK ((claim_traceparent ~ '^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$'::text))
);
CREATE FUNCTION public.attempt_public(a public.attempts) RETURNS json
    LANGUAGE sql STABLE PARALLEL SAFE
    AS $$
  SELECT json_build_object('seq', a.seq, 'attempt', a.attempt,
    'claimer_kind', a.claimer_kind, 'claimant', a.claimant, 'claimed_at', a.claimed_at,
    'last_heartbeat_at', a.last_heartbeat_at, 'lease_expires_at', a.lease_expires_at,
    'ended_at', a.ended_at, 'outcome', a.outcome, 'disposition', a.disposition,
    'died', attempt_died(a.outcome),
    'summary', a.summary, 'summary_truncated', a.summary_truncated, 'artifact', a.artifact,
    'notes_count', coalesce(a.notes_count, 0), 'notes_pruned', coalesce(a.notes_pruned, 0),
    'last_note_at', a.last_note_at,
    'usage', CASE WHEN num_nonnulls(a.input_tokens, a.output_tokens, a.cost_usd, a.model) > 0 THEN
      json_build_object('input_tokens', a.input_tokens, 'output_tokens', a.output_tokens,
                        'cost_usd', a.cost_usd, 'model', a.model) END,
    'question', CASE WHEN a.asked_n IS NOT NULL THEN (attempt_question(a.todo_id, a.seq, a.asked_n)::jsonb
      || jsonb_build_object('current', a.outcome IS NULL AND a.asked_n > a.waiting_n))::json END)
$$;
CREATE FUNCTION public.attempt_public_notes(a public.attempts, n integer) RETURNS json
    LANGUAGE sql STABLE PARALLEL SAFE
    AS $_$
  SELECT (attempt_public(a)::jsonb || jsonb_build_object('notes',
            CASE WHEN a.notes_count IS NULL OR $2 = 0 THEN '[]'::json
                 ELSE attempt_notes_newest(a.todo_id, a.seq, $2) END))::json
$_$;
CREATE FUNCTION public.attempt_question(todo_id text, seq integer, asked_n integer) RETURNS json
    LANGUAGE sql STABLE PARALLEL SAFE
    AS $_$
  SELECT json_build_object('text', q.text, 'truncated', q.truncated, 'asked_at', q.at,
    'choices', q.choices, 'expires_at', q.expires_at,
    'answers', coalesce((SELECT json_agg(json_build_object('text', x.text, 'choice', x.choice, 'who', x.author,
                                                           'at', x.at) ORDER BY x.n)
                           FROM attempt_notes x
                          WHERE x.todo_id = $1 AND x.seq = $2 AND x.n > $3 AND x.kind = 'answer'), '[]'::json),
    'expired_at', (SELECT min(x.at) FROM attempt_notes x
                    WHERE x.todo_id = $1 AND x.seq = $2 AND x.n > $3 AND x.kind = 'expired'))
    FROM attempt_notes q WHERE q.todo_id = $1 AND q.seq = $2 AND q.n = $3
$_$;
CREATE FUNCTION public.attempt_summary(todo_id text, total integer, pruned integer, pruned_outcomes jsonb, closing_seq integer, closing_outcome text) RETURNS jsonb
    LANGUAGE sql STABLE PARALLEL SAFE
    AS $_$
  SELECT jsonb_build_object(
    'total', $2::integer,
    'by_outcome', (SELECT coalesce(jsonb_object_agg(z.k, z.n), '{}'::jsonb) FROM (
        SELECT w.k, sum(w.n)::int AS n FROM (
          SELECT a.outcome::text AS k, count(*) AS n FROM attempts a
           WHERE a.todo_id = $1::text AND a.outcome IS NOT NULL AND a.seq IS DISTINCT FROM $5::integer GROUP BY 1
          UNION ALL SELECT $6::text, 1 WHERE $5::integer IS NOT NULL
          UNION ALL SELECT p.key, p.value::bigint FROM jsonb_each_text($4::jsonb) p
        ) w GROUP BY w.k) z),
    'recent', (SELECT coalesce(jsonb_agg(x.j ORDER BY x.seq DESC), '[]'::jsonb) FROM (
        SELECT a.seq, jsonb_build_object('seq', a.seq, 'attempt', a.attempt, 'outcome', o.outcome,
                                         'died', attempt_died(o.outcome::attempt_outcome)) AS j
          FROM attempts a
          CROSS JOIN LATERAL (SELECT CASE WHEN a.seq = $5::integer THEN $6::text ELSE a.outcome::text END AS outcome) o
         WHERE a.todo_id = $1::text ORDER BY a.seq DESC LIMIT 10) x),
    'omitted', greatest($2::integer - least($2::integer - $3::integer, 10), 0))
$_$;
CREATE FUNCTION public.attempt_via(claimer public.attempt_claimer_kind, endpoint uuid) RETURNS json
    LANGUAGE sql STABLE PARALLEL SAFE
    AS $_$
  SELECT CASE WHEN $1 = 'owner' THEN json_build_object('kind', 'board')
    ELSE (SELECT json_build_object('kind', e.kind, 'name', coalesce(e.client_name, e.name),
                                   'verified', e.client_verified)
            FROM endpoints e WHERE e.id = $2) END
$_$;
CREATE FUNCTION public.attempts_count_deleted() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
  PERFORM pg_advisory_xact_lock_shared(x'5B0A0012'::bigint);
  INSERT INTO attempt_outcome_counts AS c (endpoint_id, bucket, queue, outcome, n)
  SELECT t.endpoint_id, outcome_bucket(OLD.ended_at), t.queue, OLD.outcome, 1
    FROM todos t
   WHERE t.id = OLD.todo_id AND OLD.ended_at >= (SELECT f.before FROM attempt_outcomes_folded f)
  ON CONFLICT (endpoint_id, bucket, queue, outcome) DO UPDATE SET n = c.n + 1;
  RETURN NULL;
END
$$;
CREATE FUNCTION public.hook_event(state public.todo_state, next_retry_at timestamp with time zone) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $_$
  SELECT CASE WHEN $1::todo_state = 'pending' THEN 'todo.ready'
              WHEN todo_dead_letter($1::todo_state, $2::timestamptz) THEN 'todo.dead_lettered' END
$_$;
CREATE FUNCTION public.hook_payload(event text, occurred_at timestamp with time zone, id text, queue text, title text, state public.todo_state, attempt integer, max_attempts integer, attempts_total integer, endpoint_id uuid) RETURNS jsonb
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $_$
  SELECT jsonb_build_object('event', $1::text, 'occurred_at', $2::timestamptz,
    'todo', jsonb_build_object('id', $3::text, 'queue', $4::text, 'title', $5::text, 'state', $6::todo_state,
      'attempt', $7::integer, 'max_attempts', $8::integer, 'attempts_total', $9::integer,
      'endpoint_id', $10::uuid))
$_$;
CREATE FUNCTION public.hook_rows(urls text[], occurred_at timestamp with time zone, event text, id text, queue text, title text, state public.todo_state, attempt integer, max_attempts integer, attempts_total integer, endpoint_id uuid, attempts_pruned integer DEFAULT NULL::integer, pruned_outcomes jsonb DEFAULT NULL::jsonb, closed_seq integer DEFAULT NULL::integer, closed_attempt integer DEFAULT NULL::integer, closed_outcome text DEFAULT NULL::text, closed_died boolean DEFAULT NULL::boolean, closed_summary text DEFAULT NULL::text, closed_artifact text DEFAULT NULL::text, priority smallint DEFAULT NULL::smallint, after text[] DEFAULT NULL::text[], schedule_id uuid DEFAULT NULL::uuid) RETURNS TABLE(hook_event text, hook_url text, hook_todo_id text, hook_payload jsonb)
    LANGUAGE sql STABLE PARALLEL SAFE
    AS $_$
  SELECT $3::text, h.url, $4::text,
         jsonb_set(jsonb_set(jsonb_set(
             hook_payload($3::text, $2::timestamptz, $4::text, $5::text, $6::text, $7::todo_state, $8::integer,
                          $9::integer, $10::integer, $11::uuid),
             '{todo,priority}', coalesce(to_jsonb($20::smallint), 'null'::jsonb)),
             '{todo,after}', to_jsonb(coalesce($21::text[], (SELECT t.after FROM todos t WHERE t.id = $4::text),
                                               '{}'::text[]))),
             '{todo,schedule_id}', coalesce(to_jsonb(coalesce($22::uuid, (SELECT t.schedule_id FROM todos t
                                                                          WHERE t.id = $4::text))), 'null'::jsonb))
         || CASE WHEN $3::text = 'todo.dead_lettered' THEN jsonb_build_object(
              'attempt', jsonb_build_object('seq', $14::integer, 'attempt', $15::integer, 'outcome', $16::text,
                                            'died', $17::boolean, 'summary', $18::text, 'artifact', $19::text),
              'attempts', attempt_summary($4::text, $10::integer, $12::integer, $13::jsonb, $14::integer, $16::text))
            ELSE '{}'::jsonb END
    FROM unnest($1::text[]) AS h(url)
   WHERE $3::text IS NOT NULL
$_$;
CREATE FUNCTION public.lease_fence_holds(lease_token_hash bytea, token_checked boolean, caller_endpoint uuid) RETURNS boolean
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$
  SELECT caller_endpoint IS NULL OR token_checked OR lease_token_hash IS NULL
$$;
CREATE FUNCTION public.outcome_bucket(t timestamp with time zone) RETURNS timestamp with time zone
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$
  SELECT date_bin(interval '5 minutes', t, timestamptz '2000-01-01 00:00:00+00')
$$;
CREATE FUNCTION public.queue_held(user_id bigint, queue text) RETURNS bigint
    LANGUAGE sql STABLE PARALLEL SAFE
    AS $_$
  SELECT (SELECT count(*) FROM todos t
           WHERE t.endpoint_id = ANY(user_endpoints($1)) AND t.queue = $2 AND t.state = 'claimed')
       + (SELECT count(*) FROM todos t
           WHERE t.endpoint_id = ANY(user_endpoints($1)) AND t.queue = $2
             AND t.state IN ('input_required', 'auth_required'))
$_$;
CREATE FUNCTION public.queue_room(user_id bigint, queue text) RETURNS integer
    LANGUAGE plpgsql
    AS $_$
DECLARE
  most integer;
  held integer;
BEGIN
  SELECT l.max_held INTO most FROM queue_limits l WHERE l.user_id = $1 AND l.queue = $2 FOR UPDATE;
  IF most IS NULL THEN
    RETURN NULL;
  END IF;
  held := queue_held($1, $2);
  RETURN most - held;
END
$_$;
CREATE FUNCTION public.todo_continuation(pred_id text, endpoint uuid) RETURNS json
    LANGUAGE sql STABLE PARALLEL SAFE
    AS $_$
  SELECT json_build_object('id', p.id, 'state', p.state,
    'dead_letter', (p.state = 'failed' AND p.next_retry_at IS NULL), 'result', p.result,
    'attempts_total', p.attempts_total,
    'last_attempt', (SELECT attempt_public_notes(a, 3) FROM attempts a
                      WHERE a.todo_id = p.id AND a.ended_at IS NOT NULL ORDER BY a.seq DESC LIMIT 1))
    FROM todos p WHERE p.id = $1 AND p.endpoint_id = $2
$_$;
CREATE FUNCTION public.todo_continuation(pred_id text, endpoint uuid, notes integer) RETURNS json
    LANGUAGE sql STABLE PARALLEL SAFE
    AS $_$
  SELECT json_build_object('id', p.id, 'state', p.state,
    'dead_letter', todo_dead_letter(p.state, p.next_retry_at), 'result', p.result,
    'attempts_total', p.attempts_total,
    'last_attempt', (SELECT attempt_public_notes(a, $3) FROM attempts a
                      WHERE a.todo_id = p.id AND a.ended_at IS NOT NULL ORDER BY a.seq DESC LIMIT 1))
    FROM todos p WHERE p.id = $1 AND p.endpoint_id = $2
$_$;
CREATE FUNCTION public.todo_dead_letter(state public.todo_state, next_retry_at timestamp with time zone) RETURNS boolean
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$
  SELECT state = 'failed' AND next_retry_at IS NULL
$$;
CREATE FUNCTION public.todo_ended(state public.todo_state, next_retry_at timestamp with time zone) RETURNS boolean
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$
  SELECT state IN ('done', 'canceled') OR todo_dead_letter(state, next_retry_at)
$$;
CREATE FUNCTION public.todo_held_by(owner text, caller_endpoint uuid, caller_owner text) RETURNS boolean
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$
  SELECT caller_endpoint IS NULL OR owner = caller_owner
$$;
CREATE FUNCTION public.todo_in_scope(endpoint_id uuid, queue text, caller_endpoint uuid, caller_queues text[], caller_user bigint) RETURNS boolean
    LANGUAGE sql STABLE PARALLEL SAFE
    AS $$
  SELECT CASE WHEN caller_endpoint IS NULL THEN endpoint_id = ANY(user_endpoints(caller_user))
              ELSE endpoint_id = caller_endpoint AND queue = ANY(caller_queues) END
$$;
CREATE FUNCTION public.todo_notify(id text, endpoint_id uuid, queue text, state public.todo_state, kind text) RETURNS void
    LANGUAGE sql
    AS $_$
  SELECT pg_notify('switchboard_v1', json_build_object('todo', $1, 'endpoint', $2, 'queue', $3, 'state', $4,
                                                       'kind', $5)::text)
$_$;
CREATE FUNCTION public.todo_release_dependents(done_id text, hook_urls text[], at timestamp with time zone) RETURNS integer
    LANGUAGE plpgsql
    AS $$
DECLARE
  freed integer;
BEGIN
  WITH dec AS (
    UPDATE todos t SET waits = t.waits - 1, updated_at = at
     WHERE t.id IN (SELECT d.todo_id FROM todo_deps d WHERE d.after_id = done_id)
    RETURNING t.id, t.endpoint_id, t.queue, t.title, t.state, t.attempt, t.max_attempts, t.attempts_total,
              t.priority, t.scheduled, t.waits
  ),
  ready AS (
    SELECT * FROM dec WHERE dec.waits = 0 AND dec.state = 'pending' AND NOT dec.scheduled
  ),
  outbox AS (
    INSERT INTO hook_events (event, url, todo_id, payload)
    SELECT h.* FROM ready u, hook_rows(hook_urls, at, 'todo.ready', u.id, u.queue, u.title, u.state, u.attempt,
                                       u.max_attempts, u.attempts_total, u.endpoint_id, priority => u.priority) h
    RETURNING 1
  )
  SELECT count(*) INTO freed FROM (
    SELECT CASE WHEN EXISTS (SELECT FROM watchers w JOIN endpoints e ON e.user_id = w.user_id WHERE e.id = r.endpoint_id)
           THEN todo_notify(r.id, r.endpoint_id, r.queue, r.state, 'unblocked') END
      FROM ready r) x;
  RETURN freed;
END
$$;
CREATE FUNCTION public.todos_consistent() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
DECLARE
  rule text;
  why text;
BEGIN
  IF NEW.a2a_push THEN
    IF OLD.state IS DISTINCT FROM NEW.state THEN
      INSERT INTO hook_events (event, url, todo_id, payload, push_todo_id, push_config_id)
      SELECT 'a2a.task_status', c.url, c.todo_id, a2a_push_payload(NEW, now()), c.todo_id, c.id
        FROM a2a_push_configs c WHERE c.todo_id = NEW.id;
    END IF;
  END IF;
  -- The common rows first, each state's test apart: PL/pgSQL prepares each condition it
  -- evaluates once per transaction, so the shorter the conditions taken, the cheaper the row.
  IF NEW.attempt >= 0 AND NEW.attempts_total >= 0 AND NEW.attempts_pruned >= 0 THEN
    IF NEW.state = 'claimed' THEN
      IF NEW.owner IS NOT NULL AND NEW.lease_expires_at IS NOT NULL AND NEW.next_retry_at IS NULL THEN
        RETURN NEW;
      END IF;
    ELSIF NEW.owner IS NULL THEN
      IF NEW.state <> 'input_required' AND NEW.state <> 'auth_required'
         AND (NEW.next_retry_at IS NULL OR NEW.state = 'failed') THEN
        RETURN NEW;
      END IF;
    ELSIF (NEW.state = 'input_required' OR NEW.state = 'auth_required') AND NEW.next_retry_at IS NULL THEN
      RETURN NEW;
    END IF;
  END IF;
  IF NEW.attempt IS NULL OR NEW.attempts_total IS NULL OR NEW.attempts_pruned IS NULL OR NEW.state IS NULL THEN
    RETURN NEW;  -- the NOT NULL constraint refuses the row
  END IF;
  IF NEW.attempt < 0 THEN
    rule := 'todos_attempt_check'; why := 'attempt must not be negative';
  ELSIF NEW.attempts_total < 0 THEN
    rule := 'todos_attempts_total_check'; why := 'attempts_total must not be negative';
  ELSIF NEW.attempts_pruned < 0 THEN
    rule := 'todos_attempts_pruned_check'; why := 'attempts_pruned must not be negative';
  ELSIF (NEW.state IN ('claimed', 'input_required', 'auth_required')) <> (NEW.owner IS NOT NULL) THEN
    rule := 'todos_holder_matches_state';
    why := 'owner must be set exactly when the state is claimed, input_required or auth_required';
  ELSIF NEW.state = 'claimed' AND NEW.lease_expires_at IS NULL THEN
    rule := 'todos_claim_has_lease'; why := 'a claimed todo must have lease_expires_at';
  ELSE
    rule := 'todos_retry_only_when_failed'; why := 'next_retry_at may be set only on a failed todo';
  END IF;
  RAISE EXCEPTION 'new row for relation "todos" violates check constraint "%"', rule
    USING ERRCODE = 'check_violation', CONSTRAINT = rule, TABLE = 'todos', DETAIL = why;
END
$$;
CREATE FUNCTION public.todos_continues_fixed() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
  RAISE EXCEPTION 'new row for relation "todos" violates check constraint "todos_continues_fixed"'
    USING ERRCODE = 'check_violation', CONSTRAINT = 'todos_continues_fixed', TABLE = 'todos',
          DETAIL = 'continues_id never changes after insert';
END
$$;
CREATE FUNCTION public.todos_count_added() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
  INSERT INTO todo_counts (endpoint_id, queue, kind, n)
  SELECT a.endpoint_id, a.queue, 'all', count(*) FROM added a GROUP BY 1, 2;
  RETURN NULL;
END
$$;
CREATE FUNCTION public.todos_count_deleted_attempts() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
  PERFORM pg_advisory_xact_lock_shared(x'5B0A0012'::bigint);
  INSERT INTO attempt_outcome_counts AS c (endpoint_id, bucket, queue, outcome, n)
  SELECT OLD.endpoint_id, outcome_bucket(a.ended_at), OLD.queue, a.outcome, count(*)
    FROM attempts a
   WHERE a.todo_id = OLD.id AND a.outcome IS NOT NULL
     AND a.ended_at >= (SELECT f.before FROM attempt_outcomes_folded f)
   GROUP BY 2, 4
   ORDER BY 2, 4
  ON CONFLICT (endpoint_id, bucket, queue, outcome) DO UPDATE SET n = c.n + excluded.n;
  RETURN OLD;
END
$$;
CREATE FUNCTION public.todos_fields_valid() RETURNS trigger
    LANGUAGE plpgsql
    AS $_$
BEGIN
  IF NEW.queue !~ '^[A-Za-z0-9_.:-]{1,64}$' THEN
    RAISE EXCEPTION 'new row for relation "todos" violates check constraint "todos_queue_check"'
      USING ERRCODE = 'check_violation', CONSTRAINT = 'todos_queue_check', TABLE = 'todos',
            DETAIL = 'queue must be 1-64 of letters, digits, _ . : -';
  ELSIF length(NEW.title) NOT BETWEEN 1 AND 500 THEN
    RAISE EXCEPTION 'new row for relation "todos" violates check constraint "todos_title_check"'
      USING ERRCODE = 'check_violation', CONSTRAINT = 'todos_title_check', TABLE = 'todos',
            DETAIL = 'title must be 1 to 500 characters';
  ELSIF NEW.max_attempts NOT BETWEEN 1 AND 1000 THEN
    RAISE EXCEPTION 'new row for relation "todos" violates check constraint "todos_max_attempts_check"'
      USING ERRCODE = 'check_violation', CONSTRAINT = 'todos_max_attempts_check', TABLE = 'todos',
            DETAIL = 'max_attempts must be from 1 to 1000';
  END IF;
  RETURN NEW;
END
$_$;
CREATE FUNCTION public.todos_uncount_deleted() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
  INSERT INTO todo_counts (endpoint_id, queue, kind, n)
  SELECT g.endpoint_id, g.queue, k.kind, -count(*)
    FROM gone g
   CROSS JOIN LATERAL (VALUES ('all'::todo_count_kind), ('canceled'), ('dead')) k(kind)
   WHERE k.kind = 'all' OR (k.kind = 'canceled' AND g.state = 'canceled')
      OR (k.kind = 'dead' AND todo_dead_letter(g.state, g.next_retry_at))
   GROUP BY 1, 2, 3;
  RETURN NULL;
END
$$;
CREATE FUNCTION public.user_endpoints(user_id bigint) RETURNS uuid[]
    LANGUAGE sql STABLE PARALLEL SAFE
    AS $_$
  SELECT ARRAY(SELECT e.id FROM endpoints e WHERE e.user_id = $1)
$_$;
CREATE TABLE public.a2a_push_configs (
    todo_id text NOT NULL,
    id text NOT NULL,
    endpoint_id uuid NOT NULL,
    url text NOT NULL,
    token text,
    auth_scheme text,
    auth_credentials text,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT a2a_push_configs_auth_credentials_check CHECK ((length(auth_credentials) <= 4096)),
    CONSTRAINT a2a_push_configs_auth_scheme_check CHECK ((length(auth_scheme) <= 64)),
    CONSTRAINT a2a_push_configs_id_check CHECK (((length(id) >= 1) AND (length(id) <= 128))),
    CONSTRAINT a2a_push_configs_token_check CHECK ((length(token) <= 1024)),
    CONSTRAINT a2a_push_configs_url_check CHECK (((url ~ '^https?://'::text) AND (length(url) <= 2048)))
);
CREATE TABLE public.attempt_notes (
    todo_id text NOT NULL COLLATE pg_catalog."C",
    seq public.attempt_number NOT NULL,
    n integer NOT NULL,
    at timestamp with time zone NOT NULL,
    author_kind public.attempt_claimer_kind NOT NULL,
    text public.attempt_note_text NOT NULL,
    truncated boolean DEFAULT false NOT NULL,
    kind public.attempt_note_kind DEFAULT 'working'::public.attempt_note_kind NOT NULL,
    choices jsonb,
    expires_at timestamp with time zone,
    choice public.attempt_choice,
    author text,
    CONSTRAINT attempt_notes_choices_check CHECK (((choices IS NULL) OR ((jsonb_typeof(choices) = 'array'::text) AND ((jsonb_array_length(choices) >= 1) AND (jsonb_array_length(choices) <= 10))))),
    CONSTRAINT attempt_notes_n_check CHECK ((n >= 1))
);
CREATE TABLE public.attempt_outcome_counts (
    endpoint_id uuid NOT NULL,
    bucket timestamp with time zone NOT NULL,
    queue text NOT NULL COLLATE pg_catalog."C",
    outcome public.attempt_outcome NOT NULL,
    n bigint NOT NULL,
    CONSTRAINT attempt_outcome_counts_n_check CHECK ((n > 0))
);
CREATE TABLE public.attempt_outcomes_folded (
    only_row boolean DEFAULT true NOT NULL,
    before timestamp with time zone NOT NULL,
    CONSTRAINT attempt_outcomes_folded_only_row_check CHECK (only_row)
);
CREATE TABLE public.audit_records (
    id bigint NOT NULL,
    space_id bigint NOT NULL,
    actor_id bigint,
    actor_name text,
    action text NOT NULL,
    todo_id text COLLATE pg_catalog."C",
    queue text,
    detail jsonb DEFAULT '{}'::jsonb NOT NULL,
    source public.audit_source NOT NULL,
    at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT audit_records_action_check CHECK ((action ~ '^[a-z_]{1,40}$'::text)),
    CONSTRAINT audit_records_detail_check CHECK ((jsonb_typeof(detail) = 'object'::text))
);
ALTER TABLE public.audit_records ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.audit_records_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);
CREATE TABLE public.endpoints (
    id uuid DEFAULT gen_random_uuid() NOT NULL,
    user_id bigint NOT NULL,
    name text NOT NULL,
    agent_id text NOT NULL,
    token_hash bytea,
    scope text[] NOT NULL,
    queues text[] NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    last_used_at timestamp with time zone,
    revoked_at timestamp with time zone,
    kind text DEFAULT 'vended'::text NOT NULL,
    client_id text,
    client_name text,
    client_verified boolean DEFAULT false NOT NULL,
    space_id uuid,
    CONSTRAINT endpoints_agent_id_check CHECK ((agent_id ~ '^[A-Za-z0-9_.:/-]{1,128}$'::text)),
    CONSTRAINT endpoints_kind_check CHECK ((((kind = 'vended'::text) AND (token_hash IS NOT NULL) AND (client_id IS NULL)) OR ((kind = 'oauth'::text) AND (token_hash IS NULL) AND (client_id IS NOT NULL) AND (client_name IS NOT NULL)) OR ((kind = 'team'::text) AND (token_hash IS NULL) AND (client_id IS NULL) AND (space_id IS NULL)))),
    CONSTRAINT endpoints_queues_check CHECK (((cardinality(queues) > 0) OR (kind = 'team'::text)))
);
CREATE TABLE public.hook_events (
    id uuid DEFAULT gen_random_uuid() NOT NULL,
    event text NOT NULL,
    url text NOT NULL,
    todo_id text NOT NULL COLLATE pg_catalog."C",
    payload jsonb NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    tries integer DEFAULT 0 NOT NULL,
    next_attempt_at timestamp with time zone DEFAULT now() NOT NULL,
    delivered_at timestamp with time zone,
    last_error text,
    push_todo_id text,
    push_config_id text,
    CONSTRAINT hook_events_event_check CHECK ((event = ANY (ARRAY['todo.ready'::text, 'todo.dead_lettered'::text, 'todo.input_required'::text, 'todo.auth_required'::text, 'a2a.task_status'::text])))
);
CREATE TABLE public.oauth_clients (
    client_id text NOT NULL,
    metadata jsonb NOT NULL,
    secret_hash bytea,
    registered_at timestamp with time zone DEFAULT now() NOT NULL
);
CREATE TABLE public.oauth_codes (
    code_hash bytea NOT NULL,
    client_id text NOT NULL,
    client_name text NOT NULL,
    client_verified boolean NOT NULL,
    user_id bigint NOT NULL,
    agent_id text NOT NULL,
    scope text[] NOT NULL,
    queues text[] NOT NULL,
    redirect_uri text NOT NULL,
    redirect_uri_explicit boolean NOT NULL,
    code_challenge text NOT NULL,
    resource text NOT NULL,
    expires_at timestamp with time zone NOT NULL,
    used_at timestamp with time zone,
    endpoint_id uuid,
    CONSTRAINT oauth_codes_agent_id_check CHECK ((agent_id ~ '^[A-Za-z0-9_.:/-]{1,128}$'::text)),
    CONSTRAINT oauth_codes_queues_check CHECK ((cardinality(queues) > 0)),
    CONSTRAINT oauth_codes_scope_check CHECK ((cardinality(scope) > 0))
);
CREATE TABLE public.oauth_tokens (
    token_hash bytea NOT NULL,
    kind text NOT NULL,
    endpoint_id uuid NOT NULL,
    scope text[] NOT NULL,
    resource text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    expires_at timestamp with time zone NOT NULL,
    rotated_at timestamp with time zone,
    CONSTRAINT oauth_tokens_kind_check CHECK ((kind = ANY (ARRAY['access'::text, 'refresh'::text])))
);
CREATE TABLE public.queue_limits (
    user_id bigint NOT NULL,
    queue text NOT NULL,
    max_held integer NOT NULL,
    set_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT queue_limits_max_held_check CHECK (((max_held >= 1) AND (max_held <= 100000))),
    CONSTRAINT queue_limits_queue_check CHECK ((queue ~ '^[A-Za-z0-9_.:-]{1,64}$'::text))
);
CREATE TABLE public.queue_pauses (
    user_id bigint NOT NULL,
    queue text NOT NULL,
    paused_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT queue_pauses_queue_check CHECK ((queue ~ '^[A-Za-z0-9_.:-]{1,64}$'::text))
);
CREATE TABLE public.schedules (
    id uuid DEFAULT gen_random_uuid() NOT NULL,
    user_id bigint NOT NULL,
    queue text NOT NULL,
    title text NOT NULL,
    payload jsonb DEFAULT '{}'::jsonb NOT NULL,
    priority smallint DEFAULT 2 NOT NULL,
    max_attempts integer DEFAULT 5 NOT NULL,
    cron text,
    every_seconds integer,
    timezone text DEFAULT 'UTC'::text NOT NULL,
    overlap boolean DEFAULT false NOT NULL,
    paused boolean DEFAULT false NOT NULL,
    next_at timestamp with time zone NOT NULL,
    last_tick_at timestamp with time zone,
    ticks_added bigint DEFAULT 0 NOT NULL,
    ticks_skipped bigint DEFAULT 0 NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT schedules_cron_check CHECK (((char_length(cron) >= 1) AND (char_length(cron) <= 200))),
    CONSTRAINT schedules_every_seconds_check CHECK ((every_seconds >= 1)),
    CONSTRAINT schedules_max_attempts_check CHECK (((max_attempts >= 1) AND (max_attempts <= 1000))),
    CONSTRAINT schedules_payload_check CHECK ((jsonb_typeof(payload) = 'object'::text)),
    CONSTRAINT schedules_priority_check CHECK (((priority >= 0) AND (priority <= 4))),
    CONSTRAINT schedules_queue_check CHECK ((queue ~ '^[A-Za-z0-9_.:-]{1,64}$'::text)),
    CONSTRAINT schedules_timezone_check CHECK (((char_length(timezone) >= 1) AND (char_length(timezone) <= 64))),
    CONSTRAINT schedules_title_check CHECK (((length(title) >= 1) AND (length(title) <= 500))),
    CONSTRAINT schedules_when_check CHECK (((cron IS NULL) <> (every_seconds IS NULL)))
);
CREATE TABLE public.team_members (
    team_id bigint NOT NULL,
    user_id bigint NOT NULL,
    role public.team_role NOT NULL,
    added_at timestamp with time zone DEFAULT now() NOT NULL
);
CREATE TABLE public.todo_counts (
    endpoint_id uuid NOT NULL,
    queue text NOT NULL COLLATE pg_catalog."C",
    kind public.todo_count_kind NOT NULL,
    n bigint NOT NULL
);
CREATE TABLE public.todo_deps (
    todo_id text NOT NULL,
    after_id text NOT NULL,
    CONSTRAINT todo_deps_check CHECK ((todo_id <> after_id))
);
CREATE TABLE public.todo_successors (
    todo_id text NOT NULL COLLATE pg_catalog."C",
    successor_id text NOT NULL COLLATE pg_catalog."C"
);
CREATE TABLE public.users (
    id bigint NOT NULL,
    username text NOT NULL,
    password_hash text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    kind text DEFAULT 'person'::text NOT NULL,
    CONSTRAINT users_kind_check CHECK ((kind = ANY (ARRAY['person'::text, 'team'::text]))),
    CONSTRAINT users_username_check CHECK ((username ~ '^[A-Za-z0-9_.@-]{1,64}$'::text))
);
ALTER TABLE public.users ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.users_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);
CREATE TABLE public.watchers (
    user_id bigint NOT NULL,
    process uuid NOT NULL,
    expires_at timestamp with time zone NOT NULL
);
ALTER TABLE ONLY public.a2a_push_configs
    ADD CONSTRAINT a2a_push_configs_pkey PRIMARY KEY (todo_id, id);
ALTER TABLE ONLY public.attempt_notes
    ADD CONSTRAINT attempt_notes_pkey PRIMARY KEY (todo_id, seq, n);
ALTER TABLE ONLY public.attempt_outcome_counts
    ADD CONSTRAINT attempt_outcome_counts_pkey PRIMARY KEY (endpoint_id, bucket, queue, outcome);
ALTER TABLE ONLY public.attempt_outcomes_folded
    ADD CONSTRAINT attempt_outcomes_folded_pkey PRIMARY KEY (only_row);
ALTER TABLE ONLY public.attempts
    ADD CONSTRAINT attempts_one_open_per_todo EXCLUDE USING btree (todo_id WITH =) WHERE ((ended_at IS NULL)) DEFERRABLE INITIALLY DEFERRED;
ALTER TABLE ONLY public.attempts
    ADD CONSTRAINT attempts_pkey PRIMARY KEY (todo_id, seq);
ALTER TABLE ONLY public.audit_records
    ADD CONSTRAINT audit_records_pkey PRIMARY KEY (id);
ALTER TABLE ONLY public.endpoints
    ADD CONSTRAINT endpoints_pkey PRIMARY KEY (id);
ALTER TABLE ONLY public.endpoints
    ADD CONSTRAINT endpoints_token_hash_key UNIQUE (token_hash);
ALTER TABLE ONLY public.hook_events
    ADD CONSTRAINT hook_events_pkey PRIMARY KEY (id);
ALTER TABLE ONLY public.oauth_clients
    ADD CONSTRAINT oauth_clients_pkey PRIMARY KEY (client_id);
ALTER TABLE ONLY public.oauth_codes
    ADD CONSTRAINT oauth_codes_pkey PRIMARY KEY (code_hash);
ALTER TABLE ONLY public.oauth_tokens
    ADD CONSTRAINT oauth_tokens_pkey PRIMARY KEY (token_hash);
ALTER TABLE ONLY public.queue_limits
    ADD CONSTRAINT queue_limits_pkey PRIMARY KEY (user_id, queue);
ALTER TABLE ONLY public.queue_pauses
    ADD CONSTRAINT queue_pauses_pkey PRIMARY KEY (user_id, queue);
ALTER TABLE ONLY public.schedules
    ADD CONSTRAINT schedules_pkey PRIMARY KEY (id);
ALTER TABLE ONLY public.team_members
    ADD CONSTRAINT team_members_pkey PRIMARY KEY (team_id, user_id);
ALTER TABLE ONLY public.todo_deps
    ADD CONSTRAINT todo_deps_pkey PRIMARY KEY (todo_id, after_id);
ALTER TABLE ONLY public.todo_successors
    ADD CONSTRAINT todos_one_successor PRIMARY KEY (todo_id);
ALTER TABLE ONLY public.todos
    ADD CONSTRAINT todos_pkey PRIMARY KEY (id);
ALTER TABLE ONLY public.users
    ADD CONSTRAINT users_pkey PRIMARY KEY (id);
ALTER TABLE ONLY public.users
    ADD CONSTRAINT users_username_key UNIQUE (username);
ALTER TABLE ONLY public.watchers
    ADD CONSTRAINT watchers_pkey PRIMARY KEY (user_id, process);
CREATE INDEX attempts_ended_brin ON public.attempts USING brin (ended_at) WITH (autosummarize='on');
CREATE INDEX audit_records_at_idx ON public.audit_records USING btree (at);
CREATE INDEX audit_records_space_idx ON public.audit_records USING btree (space_id, at DESC, id DESC);
CREATE INDEX audit_records_todo_idx ON public.audit_records USING btree (todo_id, at) WHERE (todo_id IS NOT NULL);
CREATE UNIQUE INDEX endpoints_one_live_grant ON public.endpoints USING btree (user_id, client_id) WHERE ((kind = 'oauth'::text) AND (revoked_at IS NULL) AND (space_id IS NULL));
CREATE UNIQUE INDEX endpoints_one_live_team_grant ON public.endpoints USING btree (user_id, client_id, agent_id) WHERE ((kind = 'oauth'::text) AND (revoked_at IS NULL) AND (space_id IS NOT NULL));
CREATE UNIQUE INDEX endpoints_team_space ON public.endpoints USING btree (user_id) WHERE (kind = 'team'::text);
CREATE INDEX endpoints_user_idx ON public.endpoints USING btree (user_id);
CREATE INDEX hook_events_delivered_brin ON public.hook_events USING brin (delivered_at);
CREATE INDEX hook_events_due_idx ON public.hook_events USING btree (next_attempt_at) WHERE (delivered_at IS NULL);
CREATE INDEX hook_events_push_config_idx ON public.hook_events USING btree (push_todo_id, push_config_id) WHERE (push_todo_id IS NOT NULL);
CREATE INDEX oauth_codes_expires_idx ON public.oauth_codes USING btree (expires_at);
CREATE INDEX oauth_tokens_endpoint_idx ON public.oauth_tokens USING btree (endpoint_id);
CREATE INDEX oauth_tokens_expires_idx ON public.oauth_tokens USING btree (expires_at);
CREATE INDEX schedules_due_idx ON public.schedules USING btree (next_at) WHERE (NOT paused);
CREATE INDEX schedules_user_idx ON public.schedules USING btree (user_id, created_at);
CREATE INDEX team_members_user_idx ON public.team_members USING btree (user_id, team_id);
CREATE INDEX todo_counts_endpoint_idx ON public.todo_counts USING btree (endpoint_id);
CREATE INDEX todo_deps_after_idx ON public.todo_deps USING btree (after_id);
CREATE INDEX todo_successors_successor_idx ON public.todo_successors USING btree (successor_id);
CREATE INDEX todos_a2a_idx ON public.todos USING btree (endpoint_id, a2a_context, created_at DESC, id) WHERE (a2a_context IS NOT NULL);
CREATE INDEX todos_claimed_idx ON public.todos USING btree (endpoint_id) WHERE (state = 'claimed'::public.todo_state);
CREATE INDEX todos_due_idx ON public.todos USING btree (run_at) WHERE scheduled;
CREATE INDEX todos_endpoint_created_idx ON public.todos USING btree (endpoint_id, created_at DESC, id) INCLUDE (queue, state, next_retry_at);
CREATE INDEX todos_interrupted_idx ON public.todos USING btree (endpoint_id) WHERE (state = ANY (ARRAY['input_required'::public.todo_state, 'auth_required'::public.todo_state]));
CREATE UNIQUE INDEX todos_live_key ON public.todos USING btree (endpoint_id, queue, key) WHERE ((key IS NOT NULL) AND (state <> ALL (ARRAY['done'::public.todo_state, 'canceled'::public.todo_state])) AND ((state <> 'failed'::public.todo_state) OR (next_retry_at IS NOT NULL)));
CREATE INDEX todos_ready_idx ON public.todos USING btree (endpoint_id, priority, created_at, id) WHERE ((state = 'pending'::public.todo_state) AND (NOT scheduled) AND (waits = 0));
CREATE INDEX todos_retry_idx ON public.todos USING btree (next_retry_at) WHERE ((state = 'failed'::public.todo_state) AND (next_retry_at IS NOT NULL));
CREATE INDEX todos_schedule_idx ON public.todos USING btree (schedule_id, created_at) WHERE (schedule_id IS NOT NULL);
CREATE INDEX todos_scheduled_idx ON public.todos USING btree (endpoint_id, run_at) WHERE scheduled;
CREATE INDEX todos_updated_brin ON public.todos USING brin (updated_at);
CREATE INDEX todos_waiting_idx ON public.todos USING btree (endpoint_id, queue) WHERE ((state = 'pending'::public.todo_state) AND (waits > 0));
CREATE TRIGGER attempts_count_deleted AFTER DELETE ON public.attempts FOR EACH ROW WHEN ((old.outcome IS NOT NULL)) EXECUTE FUNCTION public.attempts_count_deleted();
CREATE TRIGGER todos_consistent BEFORE INSERT OR UPDATE OF state, owner, lease_expires_at, next_retry_at, attempt, attempts_total, attempts_pruned ON public.todos FOR EACH ROW EXECUTE FUNCTION public.todos_consistent();
CREATE TRIGGER todos_continues_fixed BEFORE UPDATE OF continues_id ON public.todos FOR EACH ROW WHEN ((old.continues_id IS DISTINCT FROM new.continues_id)) EXECUTE FUNCTION public.todos_continues_fixed();
CREATE TRIGGER todos_count_added AFTER INSERT ON public.todos REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION public.todos_count_added();
CREATE TRIGGER todos_count_deleted_attempts BEFORE DELETE ON public.todos FOR EACH ROW EXECUTE FUNCTION public.todos_count_deleted_attempts();
CREATE TRIGGER todos_fields_valid BEFORE INSERT OR UPDATE OF queue, title, max_attempts ON public.todos FOR EACH ROW EXECUTE FUNCTION public.todos_fields_valid();
CREATE TRIGGER todos_uncount_deleted AFTER DELETE ON public.todos REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION public.todos_uncount_deleted();
ALTER TABLE ONLY public.a2a_push_configs
    ADD CONSTRAINT a2a_push_configs_endpoint_id_fkey FOREIGN KEY (endpoint_id) REFERENCES public.endpoints(id) ON DELETE CASCADE;
ALTER TABLE ONLY public.a2a_push_configs
    ADD CONSTRAINT a2a_push_configs_todo_id_fkey FOREIGN KEY (todo_id) REFERENCES public.todos(id) ON DELETE CASCADE;
ALTER TABLE ONLY public.attempt_notes
    ADD CONSTRAINT attempt_notes_todo_id_seq_fkey FOREIGN KEY (todo_id, seq) REFERENCES public.attempts(todo_id, seq) ON DELETE CASCADE;
ALTER TABLE ONLY public.attempts
    ADD CONSTRAINT attempts_todo_id_fkey FOREIGN KEY (todo_id) REFERENCES public.todos(id) ON DELETE CASCADE;
ALTER TABLE ONLY public.audit_records
    ADD CONSTRAINT audit_records_actor_id_fkey FOREIGN KEY (actor_id) REFERENCES public.users(id) ON DELETE SET NULL;
ALTER TABLE ONLY public.audit_records
    ADD CONSTRAINT audit_records_space_id_fkey FOREIGN KEY (space_id) REFERENCES public.users(id) ON DELETE CASCADE;
ALTER TABLE ONLY public.endpoints
    ADD CONSTRAINT endpoints_space_id_fkey FOREIGN KEY (space_id) REFERENCES public.endpoints(id);
ALTER TABLE ONLY public.endpoints
    ADD CONSTRAINT endpoints_user_id_fkey FOREIGN KEY (user_id) REFERENCES public.users(id) ON DELETE CASCADE;
ALTER TABLE ONLY public.hook_events
    ADD CONSTRAINT hook_events_push_config_fk FOREIGN KEY (push_todo_id, push_config_id) REFERENCES public.a2a_push_configs(todo_id, id) ON DELETE CASCADE;
ALTER TABLE ONLY public.oauth_codes
    ADD CONSTRAINT oauth_codes_endpoint_id_fkey FOREIGN KEY (endpoint_id) REFERENCES public.endpoints(id) ON DELETE CASCADE;
ALTER TABLE ONLY public.oauth_codes
    ADD CONSTRAINT oauth_codes_user_id_fkey FOREIGN KEY (user_id) REFERENCES public.users(id) ON DELETE CASCADE;
ALTER TABLE ONLY public.oauth_tokens
    ADD CONSTRAINT oauth_tokens_endpoint_id_fkey FOREIGN KEY (endpoint_id) REFERENCES public.endpoints(id) ON DELETE CASCADE;
ALTER TABLE ONLY public.queue_limits
    ADD CONSTRAINT queue_limits_user_id_fkey FOREIGN KEY (user_id) REFERENCES public.users(id) ON DELETE CASCADE;
ALTER TABLE ONLY public.queue_pauses
    ADD CONSTRAINT queue_pauses_user_id_fkey FOREIGN KEY (user_id) REFERENCES public.users(id) ON DELETE CASCADE;
ALTER TABLE ONLY public.schedules
    ADD CONSTRAINT schedules_user_id_fkey FOREIGN KEY (user_id) REFERENCES public.users(id) ON DELETE CASCADE;
ALTER TABLE ONLY public.team_members
    ADD CONSTRAINT team_members_team_id_fkey FOREIGN KEY (team_id) REFERENCES public.users(id) ON DELETE CASCADE;
ALTER TABLE ONLY public.team_members
    ADD CONSTRAINT team_members_user_id_fkey FOREIGN KEY (user_id) REFERENCES public.users(id) ON DELETE CASCADE;
ALTER TABLE ONLY public.todo_deps
    ADD CONSTRAINT todo_deps_after_id_fkey FOREIGN KEY (after_id) REFERENCES public.todos(id) ON DELETE CASCADE;
ALTER TABLE ONLY public.todo_deps
    ADD CONSTRAINT todo_deps_todo_id_fkey FOREIGN KEY (todo_id) REFERENCES public.todos(id) ON DELETE CASCADE;
ALTER TABLE ONLY public.todos
    ADD CONSTRAINT todos_endpoint_id_fkey FOREIGN KEY (endpoint_id) REFERENCES public.endpoints(id) ON DELETE CASCADE;
ALTER TABLE ONLY public.todos
    ADD CONSTRAINT todos_schedule_id_fkey FOREIGN KEY (schedule_id) REFERENCES public.schedules(id) ON DELETE SET NULL;
