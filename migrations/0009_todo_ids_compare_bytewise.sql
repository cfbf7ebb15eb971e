-- Todo ids compare byte by byte (COLLATE "C"): todos.id, attempts.todo_id and
-- hook_events.todo_id.
--
-- Why (REQ-18): an id is an opaque key, never sorted for a reader, yet under the database's
-- default collation every comparison of two ids went through the C library's locale-aware
-- strcoll (after copying both to terminated buffers). Every transition compares ids a dozen
-- times or more: the descents of todos_pkey, of attempts_pkey and of the exclusion index
-- behind attempts_one_open_per_todo, the foreign-key check of each new attempt, and the
-- ties of the pending index (endpoint_id, created_at, id). Counted with cachegrind on a
-- claim_next plus complete under C.UTF-8, the locale-aware compares were about 18k
-- instructions; under en_US.UTF-8 or an ICU collation they cost several times more.
--
-- What changes for a reader: nothing. Ids are generated lowercase hex uuids, whose order is
-- the same byte by byte as under any collation that orders ASCII letters and digits, so the
-- claim order of todos created in the same microsecond does not change either.
--
-- Cost of the migration: no table is rewritten (text stays text), but the indexes that hold
-- an id are rebuilt under the migration's lock: todos_pkey, todos_pending_idx,
-- todos_endpoint_created_idx, attempts_pkey and attempts_one_open_per_todo. On a large
-- deployment, run `switchboard migrate` in a quiet moment.

ALTER TABLE todos ALTER COLUMN id TYPE text COLLATE "C";
ALTER TABLE attempts ALTER COLUMN todo_id TYPE text COLLATE "C";
ALTER TABLE hook_events ALTER COLUMN todo_id TYPE text COLLATE "C";
