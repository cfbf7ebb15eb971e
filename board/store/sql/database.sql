-- database.sql: the migration runner, LISTEN and the embedded server's setup (board/store/db.py).
-- The migrations themselves are the files of migrations/, run as they are.

-- name: migrations_lock
-- description: Takes the migrators' advisory lock (key from board/store/db.py): one migrator at a time
SELECT pg_advisory_lock(%(key)s);

-- name: migrations_unlock
-- description: Releases the migrators' advisory lock
SELECT pg_advisory_unlock(%(key)s);

-- name: migrations_table_create
-- description: Creates the table of applied migrations, if there is none yet
CREATE TABLE IF NOT EXISTS schema_migrations (
  version integer PRIMARY KEY, name text NOT NULL, checksum text NOT NULL,
  applied_at timestamptz NOT NULL DEFAULT now());

-- name: migrations_applied
-- description: The migrations applied, with the checksum of each as it was applied
SELECT version, name, checksum FROM schema_migrations ORDER BY version;

-- name: migration_record
-- description: Records one migration as applied, in the transaction that applied it
INSERT INTO schema_migrations (version, name, checksum) VALUES (%(version)s, %(name)s, %(checksum)s);

-- name: notify_listen
-- description: Listens on the channel every statement's pg_notify uses (vocabulary.NOTIFY_CHANNEL)
LISTEN switchboard_v1;

-- name: embedded_database_exists
-- description: Whether the embedded server has the database named (Switchboard's, or a bench's)
SELECT 1 FROM pg_database WHERE datname = %(name)s;

-- name: embedded_database_create
-- description: Creates Switchboard's database in the embedded server (db.EMBEDDED_DATABASE)
CREATE DATABASE switchboard;
