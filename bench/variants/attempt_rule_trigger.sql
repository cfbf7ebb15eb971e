-- The attempts' cross-column rules as a row trigger, the form the store's own checks
-- replaced, frozen for comparison: run the shipped store with it restored, side by side
-- with the store as shipped, to see what holding the rules in the store buys (REQ-18):
--
--   python bench/claim_contention.py --workers 8 --slices 20 \
--       --variant rule-trigger=@bench/variants/attempt_rule_trigger.sql

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

CREATE TRIGGER attempts_consistent
  BEFORE INSERT OR UPDATE OF ended_at, outcome, disposition, summary, artifact, claimer_kind, claimer_endpoint_id
  ON attempts FOR EACH ROW EXECUTE FUNCTION attempts_consistent();
