"""`switchboard demo`: the whole product, live, on one machine: every outcome on the Board
within about a minute, then a steady Board a newcomer can watch for an hour.

What it does, in order:

1. Binds the port (a busy port fails at once, before anything starts).
2. Starts the real server in this process (uvicorn, `board.app.create_app`): the Board at
   `/`, MCP at `/mcp`, `/metrics`, on an embedded Postgres in the demo's own data dir, migrated.
3. Creates, idempotently, a demo human (user `demo`) and one demo endpoint (agent id `demo`,
   every verb, the demo queues), and prints the sign-in URL, the user and password, the MCP
   URL, the endpoint token and a ready-to-paste MCP client configuration.
4. Runs a planner that seeds a few queues with todos over MCP, and seeds a queue again
   whenever nothing in it is pending, so a long demo keeps moving (the ingest queue gets one
   todo at a time, so that a lapsed lease there is what `claim_next` finds), within the
   demo's bounds (see Settling).
5. Runs simulated agents, each a `switchboard_worker.Worker` (the worker any Python agent can
   use, docs/worker.md: its own MCP SDK client, background heartbeats, reconnects, replayed
   closes) against the real `/mcp`. They all
   use the one demo endpoint (todos belong to an endpoint, so workers that share work share
   a credential) and tell themselves apart by claimant labels such as `demo/fixer-1/run-1`:

   - `fixer-1`, `fixer-2` (queues builds, docs): claim, heartbeat, then complete, fail (a
     retry is scheduled) or release mid-work, in a fixed rotation, with summaries and https
     or `mcp://cairn/` artifacts.
   - `reviewer-1` (triage): claims with `require_fence` and passes its `lease_token` on every
     call; sometimes pauses for input (interrupt, resume), sometimes fails.
   - `flaky-1` (flaky): fails as the todo's payload scripts it; some todos succeed on their
     retry, others reach their last attempt and become dead letters.
   - `crasher-1` (ops): sometimes dies mid-work (stops heartbeating on a 3 s lease), so the
     reaper closes the attempt `reaped`; it restarts as the next run and reports what the
     reaper did. Three deaths on one todo dead-letter it.
   - `hung-1` (ingest): claims fenced on a 3 s lease and sometimes hangs; `rescuer-1` watches
     the queue and takes the lapsed lease over with `claim_next` the moment it lapses (the
     hung attempt closes `lease_expired`). When `hung-1` wakes up, its stale lease token is
     refused with `conflict`: the fence at work.

   Within the first minute the Board shows attempts with every outcome: completed, failed,
   released, reaped and lease_expired, and dead letters.
6. Prints one line per agent action: the time, the agent, the action, the queue, the todo's
   title and what came of it. It never prints a lease token, a summary or an artifact (the
   endpoint token is printed once, in the banner, because it is what you paste into a client).

Settling. Once the agents have shown every outcome (completed, failed, released, reaped,
lease_expired and a dead letter) and the first minute is over, the demo prints one line
saying so and settles: each agent takes a break of 4 to 8 s between todos, so a few todos
finish every ten seconds instead of one a second. Two bounds hold from the start (the first
minute on a fresh data dir stays under them, at about 20 live and 80 in all, so it is as
lively as ever):

- at most 30 live todos (pending, held, or failed with a retry to come): the planner adds
  work only while what it adds fits under the bound;
- at most 120 todos in all: before adding, the planner removes the oldest finished todos
  (done, canceled, dead letters) of its own, by id, as the demo user deletes them on the Board.

So the Board holds the live work and the newest ~90 finished todos, a few minutes of history,
for as long as the demo runs; a data dir from a long earlier run is trimmed to the bound as
soon as the planner next adds work. Two environment variables change the bounds (a test
uses them to see the demo settle within seconds): `SWITCHBOARD_DEMO_LIVE_TODOS` (default
30) and `SWITCHBOARD_DEMO_MAX_TODOS` (default 120, at least the live bound); anything but a
whole number of at least 1 is an error (exit 2).

The demo deletes only what it added. The planner remembers the id of every todo it adds in
demo.json, so a second run knows them too; the bounds count only those, and only those are
removed. A todo you add yourself (on the Board, signed in as the demo user, or through an
endpoint of your own) is never counted and never deleted by the demo, finished or not; the
server's retention (7 days untouched, below) is the only thing that removes it.

Stopping: Ctrl-C (SIGINT), SIGTERM or `--duration SECONDS` stop the agents (each releases
what it holds, "released on shutdown"; agents that are playing dead leave theirs to the
reaper), then the server, then the embedded Postgres, and the command exits 0. A second
Ctrl-C only cancels the agents' goodbyes: Postgres is always stopped cleanly.

Where the data lives: `<data dir>/demo`, where the data dir is `SWITCHBOARD_DATA_DIR` or
`./.switchboard` (so `./.switchboard/demo` by default). The demo never uses the database
`switchboard serve` uses: `DATABASE_URL` is ignored and the embedded Postgres lives in
`<data dir>/demo/pgdata`. `<data dir>/demo/demo.json` (mode 0600) keeps the demo password, the
endpoint token, the session secret, the planner's seeding rounds and the ids of the todos it added, so a second run signs in
with the same password, reuses the token and starts from the same data. Delete the directory
to start over. One demo runs in a data dir at a time: a second one there exits 2 at once with
one line naming the running demo's pid and URL (`board.demo.lock`: an fcntl lock on
`<data dir>/demo/demo.lock`, dropped by the kernel however the demo ends, so a killed demo
blocks nobody).

Settings the demo overrides so that things happen within a minute (environment values for
these are ignored here): reaper every 1 s, retry scheduler every 0.5 s, retry backoff 2 s
growing to at most 10 s, default lease 10 s, no notify hooks (demo todos are not real work),
retention 7 days checked every minute (a backstop; the bound on todos in all is what keeps
the Board short, and retention applies to every todo in the demo's database, yours too). The session secret is `SWITCHBOARD_SECRET_KEY` when set, else a random one
kept in demo.json.

The parts, by what they do:

- `board.demo.seeding`: the data dir, the settings, demo.json, the demo human and endpoint,
  the queues and seeds, the agents' summaries and artifacts, and the bounds (`Limits`).
- `board.demo.stage`: what the agents and the planner see of the run (`Stage`, which `Demo`
  provides), so neither imports the runner.
- `board.demo.agents`: the simulated agents.
- `board.demo.planner`: the planner, which stocks the queues and keeps the bounds.
- `board.demo.banner`: everything printed (banner, credentials, action lines, notes).
- `board.demo.lock`: one demo per data dir.
- `board.demo.runner`: the orchestration (`Demo`, `run_demo`): server, Postgres, signals,
  settling.

Nothing here writes SQL: the demo goes through MCP tools and public `board.store.store.Store`
methods only.
"""

from board.demo.runner import Demo, run_demo
from board.demo.seeding import (
    QUEUES,
    SUMMARIES,
    TRICKLE,
    Credentials,
    DemoState,
    Limits,
    Seed,
    demo_data_dir,
    demo_settings,
)

__all__ = [
    "QUEUES", "SUMMARIES", "TRICKLE", "Credentials", "Demo", "DemoState", "Limits", "Seed",
    "demo_data_dir", "demo_settings", "run_demo",
]
