-- The todos table's CHECK constraints (0001, 0002) become two row triggers: the same rules,
-- refused with the same SQLSTATE (23514, check_violation), the same constraint names and the
-- same message, so the store's error mapping and anything reading the errors see no change.
--
-- Why (REQ-18): PostgreSQL reads every CHECK of a table back from its stored node tree and
-- plans it again on every INSERT and UPDATE statement (ExecRelCheck: stringToNode,
-- expression_planner, ExecInitExpr), whatever columns the statement sets. todos had nine,
-- one of them a regular expression, and every transition updates a todo: counted with
-- cachegrind, the rebuild was 390k instructions of a claim_next plus complete cycle, more than
-- a quarter of the server's work for it. A PL/pgSQL trigger is compiled and planned once per
-- backend, and a trigger on named columns runs only when a statement sets one of them.
--
-- No column changes type, so the table is not rewritten; its rows already met the rules.

CREATE FUNCTION todos_fields_valid() RETURNS trigger LANGUAGE plpgsql AS $$
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
$$;

CREATE FUNCTION todos_consistent() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  rule text;
  why text;
BEGIN
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
    RETURN NEW;  -- the NOT NULL constraint refuses the row, as it did before
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

ALTER TABLE todos
  DROP CONSTRAINT todos_queue_check,
  DROP CONSTRAINT todos_title_check,
  DROP CONSTRAINT todos_max_attempts_check,
  DROP CONSTRAINT todos_attempt_check,
  DROP CONSTRAINT todos_attempts_total_check,
  DROP CONSTRAINT todos_attempts_pruned_check,
  DROP CONSTRAINT todos_holder_matches_state,
  DROP CONSTRAINT todos_claim_has_lease,
  DROP CONSTRAINT todos_retry_only_when_failed;

-- A rule can only be broken by a statement that sets a column it reads; the rows already
-- there met every rule.
CREATE TRIGGER todos_fields_valid BEFORE INSERT OR UPDATE OF queue, title, max_attempts ON todos
  FOR EACH ROW EXECUTE FUNCTION todos_fields_valid();
CREATE TRIGGER todos_consistent
  BEFORE INSERT OR UPDATE OF state, owner, lease_expires_at, next_retry_at, attempt, attempts_total, attempts_pruned
  ON todos FOR EACH ROW EXECUTE FUNCTION todos_consistent();
