-- The todos waiting for a person (input_required, auth_required) of an endpoint, by key: the
-- Agents page reads what each endpoint holds through this and todos_claimed_idx. Few todos
-- wait at once, and a claim or a close never writes an entry here (neither state is theirs).
CREATE INDEX todos_interrupted_idx ON todos (endpoint_id) WHERE state IN ('input_required', 'auth_required');
