-- Every human watched, as when a Board is open on their todos: every transition notifies
-- (bench/claim_contention.py --variant watched=@bench/variants/watched.sql).
INSERT INTO watchers (user_id, process, expires_at)
SELECT id, '00000000-0000-0000-0000-000000000001', now() + interval '1 day' FROM users;
