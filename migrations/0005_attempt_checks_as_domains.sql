-- The attempts table's invariants, kept, in a form PostgreSQL checks cheaply (REQ-18).
--
-- PostgreSQL reads a table's CHECK constraints back from their stored node trees and plans
-- them again on every INSERT or UPDATE statement, once per constraint. On attempts, whose
-- row is inserted by every claim and updated by every close, the nine CHECKs of 0002 were
-- about a fifth of the server time the attempt writes add to a claim plus complete cycle.
-- A domain's constraints are kept already planned in the type cache, so the per-column
-- bounds move to domains; the three rules that tie columns together become one CHECK
-- without array constants (an array constant is the costliest node to read back).
-- Same rules, same rows accepted and refused.

CREATE DOMAIN attempt_number AS integer CHECK (VALUE >= 1);
CREATE DOMAIN attempt_claimant AS text CHECK (octet_length(VALUE) <= 128);
CREATE DOMAIN attempt_summary AS text CHECK (octet_length(VALUE) <= 2048);
CREATE DOMAIN attempt_artifact AS text CHECK (octet_length(VALUE) <= 512);
CREATE DOMAIN lease_token_sha256 AS bytea CHECK (length(VALUE) = 32);

ALTER TABLE attempts
  DROP CONSTRAINT attempts_seq_check,
  DROP CONSTRAINT attempts_attempt_check,
  DROP CONSTRAINT attempts_claimant_check,
  DROP CONSTRAINT attempts_summary_check,
  DROP CONSTRAINT attempts_artifact_check,
  DROP CONSTRAINT attempts_lease_token_hash_check,
  DROP CONSTRAINT attempts_closed_consistently,
  DROP CONSTRAINT attempts_claimer_endpoint_matches_kind,
  DROP CONSTRAINT attempts_died_reported_nothing,
  ALTER COLUMN seq TYPE attempt_number,
  ALTER COLUMN attempt TYPE attempt_number,
  ALTER COLUMN claimant TYPE attempt_claimant,
  ALTER COLUMN summary TYPE attempt_summary,
  ALTER COLUMN artifact TYPE attempt_artifact,
  ALTER COLUMN lease_token_hash TYPE lease_token_sha256,
  -- ended_at, outcome and disposition are null together (an open attempt) or set together;
  -- claimer_endpoint_id is set exactly for an endpoint's claim; a died attempt (REQ-4)
  -- reported no summary and no artifact.
  ADD CONSTRAINT attempts_consistent CHECK (
        (ended_at IS NULL) = (outcome IS NULL) AND (outcome IS NULL) = (disposition IS NULL)
    AND (claimer_kind = 'endpoint') = (claimer_endpoint_id IS NOT NULL)
    AND (outcome <> 'lease_expired' AND outcome <> 'reaped' OR (summary IS NULL AND artifact IS NULL)));
