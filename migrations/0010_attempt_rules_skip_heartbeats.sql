-- The attempts table's rule trigger (attempts_consistent, 0006) fires only when a statement
-- sets a column its rules read: ended_at, outcome, disposition, summary, artifact,
-- claimer_kind, claimer_endpoint_id. Same function, same rules, same errors.
--
-- Why: a heartbeat (and an interrupt or resume) updates the open attempt's
-- last_heartbeat_at and lease_expires_at, which no rule reads, and still paid a PL/pgSQL
-- call set up afresh in its transaction. An attempt inserted or closed is checked as before.
-- The todos triggers of 0008 are defined the same way.

DROP TRIGGER attempts_consistent ON attempts;

CREATE TRIGGER attempts_consistent
  BEFORE INSERT OR UPDATE OF ended_at, outcome, disposition, summary, artifact, claimer_kind, claimer_endpoint_id
  ON attempts FOR EACH ROW EXECUTE FUNCTION attempts_consistent();
