-- Todos added over A2A (board/a2a/): the A2A client that sent the message (the adding
-- endpoint's agent id, which the Board's drawer names: "added over A2A by <client>") and the
-- A2A contextId that groups a task with its follow-ups (the client's, or the first task's
-- id). Both null for a todo added any other way; both set together.

ALTER TABLE todos ADD COLUMN a2a_client text, ADD COLUMN a2a_context text,
  ADD CONSTRAINT todos_a2a_check CHECK ((a2a_client IS NULL) = (a2a_context IS NULL)
                                        AND length(a2a_client) <= 128 AND length(a2a_context) <= 256);

-- ListTasks: a client's tasks, newest first, by context or all of them.
CREATE INDEX todos_a2a_idx ON todos (endpoint_id, a2a_context, created_at DESC, id) WHERE a2a_context IS NOT NULL;
