-- The attempts table's three cross-column rules are no longer checked by a row trigger
-- (attempts_consistent, 0006 and 0010). board/store.py, the one module that writes attempts,
-- holds them, and the tests hold the store to them. Everything else about an attempt stays
-- in the database: NOT NULL, the per-column bounds as domains (0005: seq and attempt >= 1,
-- claimant 128 bytes, summary 2048, artifact 512, a 32-byte lease token hash), the primary
-- key, the cascading foreign key to todos, and REQ-2's one open attempt per todo, checked at
-- commit. The todos table keeps its rule triggers (0008): they are the lifecycle checks the
-- table had before SPEC-0034.
--
-- The rules: ended_at, outcome and disposition are null together (an open attempt) or set
-- together; claimer_endpoint_id is set exactly for an endpoint's claim; a died attempt
-- (lease_expired, reaped) reports no summary and no artifact. The store writes every one
-- of those columns from its own SQL text: outcomes, dispositions, ended_at and the claimer
-- are literals or expressions of the statement, and only fail, release and complete take a
-- summary or artifact, never with a died outcome.
--
-- Why (REQ-18): the trigger ran a PL/pgSQL call on every claim and every close. PostgreSQL
-- sets PL/pgSQL up afresh in each transaction and tears it down at commit, inside the
-- section where notifying transactions commit one at a time. Measured on a claim plus
-- complete: 33k server instructions of 1,172k; at 8 workers, throughput +3.8%, +4.2% and
-- +4.9% in three runs with the trigger and without it side by side. Cheaper forms of the
-- same check were measured and are slower: one CHECK constraint (PostgreSQL plans a CHECK
-- again on every statement; 0.92 of the trigger's throughput), the rule as the trigger's
-- WHEN condition (planned again too; equal), the rules as the predicate of an empty partial
-- index whose expression raises (+47k instructions), and the trigger's tests merged into one
-- condition (equal).

DROP TRIGGER attempts_consistent ON attempts;
DROP FUNCTION attempts_consistent();
