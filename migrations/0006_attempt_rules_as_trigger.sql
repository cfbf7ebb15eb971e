-- The attempts table's cross-column rules move from the CHECK attempts_consistent (0005) to a
-- BEFORE INSERT OR UPDATE row trigger of the same name. Same rules, same SQLSTATE (23514,
-- check_violation) and the same constraint name in the error, so a bad row is refused
-- exactly as before.
--
-- Why: PostgreSQL reads a CHECK constraint back from its stored node tree and plans it again
-- for every INSERT and UPDATE statement (ExecRelCheck: stringToNode, expression_planner,
-- ExecInitExpr). Counted with cachegrind on a claim plus complete, that rebuild was 207k
-- instructions a cycle, a third of everything the attempt writes add. A PL/pgSQL trigger is
-- compiled and planned once per backend; the same three rules cost 35k.
--
-- The rules: ended_at, outcome and disposition are null together (an open attempt) or set
-- together; claimer_endpoint_id is set exactly for an endpoint's claim; a died attempt
-- (lease_expired, reaped; REQ-4) reported no summary and no artifact. The per-column bounds
-- stay in their domains (0005), which are already planned once per backend.

CREATE FUNCTION attempts_consistent() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  -- Open and closed rows are tested apart: PL/pgSQL prepares each condition it evaluates
  -- once per transaction, so the shorter the condition taken, the cheaper the row.
  IF NEW.outcome IS NULL THEN
    IF NEW.ended_at IS NULL AND NEW.disposition IS NULL
       AND (NEW.claimer_kind = 'endpoint') = (NEW.claimer_endpoint_id IS NOT NULL) THEN
      RETURN NEW;
    END IF;
  ELSIF NEW.ended_at IS NOT NULL AND NEW.disposition IS NOT NULL
        AND (NEW.claimer_kind = 'endpoint') = (NEW.claimer_endpoint_id IS NOT NULL)
        AND (NEW.outcome NOT IN ('lease_expired', 'reaped') OR (NEW.summary IS NULL AND NEW.artifact IS NULL)) THEN
    RETURN NEW;
  END IF;
  RAISE EXCEPTION 'attempt % of todo % breaks a rule of the attempts table', NEW.seq, NEW.todo_id
    USING ERRCODE = 'check_violation', CONSTRAINT = 'attempts_consistent', TABLE = 'attempts',
          DETAIL = CASE
            WHEN NOT ((NEW.ended_at IS NULL) = (NEW.outcome IS NULL) AND (NEW.outcome IS NULL) = (NEW.disposition IS NULL))
              THEN 'ended_at, outcome and disposition must be null together or set together'
            WHEN (NEW.claimer_kind = 'endpoint') <> (NEW.claimer_endpoint_id IS NOT NULL)
              THEN 'claimer_endpoint_id must be set exactly when claimer_kind is endpoint'
            ELSE 'a died attempt (lease_expired or reaped) carries no summary and no artifact' END;
END
$$;

ALTER TABLE attempts DROP CONSTRAINT attempts_consistent;

CREATE TRIGGER attempts_consistent BEFORE INSERT OR UPDATE ON attempts
  FOR EACH ROW EXECUTE FUNCTION attempts_consistent();
