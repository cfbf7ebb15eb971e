"""/metrics in Prometheus text format: aggregates only (SPEC-0023, SPEC-0034 REQ-14).

Counters move after commit, from the store's committed-transition observers, so a rolled
back transition never counts. No label ever carries a todo id, a summary, an artifact or a
claimant. The queue label is bounded: past `metrics_queue_label_max` distinct queues, the
rest share the label value `_other` (SPEC-0023 REQ-5).

Questions: `switchboard_todos_waiting_for_person{queue}` (interrupted todos, read at scrape)
and `switchboard_question_answer_seconds{queue}` (question to first answer, observed from the
"answered" transition's waited_seconds).

The claim's order: `switchboard_todos_scheduled{queue}` (pending todos waiting for their
run_at), `switchboard_todos_waiting{queue}` (pending todos waiting for other todos), and per limited queue and owner `switchboard_queue_limit{queue,user}` and
`switchboard_queue_limit_held{queue,user}`, all read at scrape.

Schedules: `switchboard_schedule_ticks_added{queue}` and
`switchboard_schedule_ticks_skipped{queue}`, the schedules' own counters summed by queue and
read at scrape (a removed schedule's ticks leave the sums).
"""

from __future__ import annotations

import hmac
import threading

from litestar import Request, Response, get
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from board.errors import Unavailable
from board.config import Settings
from board.store.store import Transition

OTHER_QUEUES = "_other"
# A person answers in seconds when watching, in hours or days when a hook fetched them.
QUESTION_ANSWER_BUCKETS = (1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200, 14400, 43200, 86400, 259200,
                           604800, 2592000)  # up to the longest expiry, 30 days
WAITING_STATES = ("input_required", "auth_required")


class Metrics:
    def __init__(self, settings: Settings):
        self.settings = settings
        self.registry = CollectorRegistry(auto_describe=True)
        self._queues: set[str] = set()
        self._lock = threading.Lock()
        r = self.registry
        self.attempts_closed = Counter(
            "switchboard_todo_attempts_closed", "Attempts closed, by queue and outcome (after commit).",
            ["queue", "outcome"], registry=r)
        self.lease_expired = Counter(
            "switchboard_lease_expired", "Leases that lapsed: attempts closed lease_expired or reaped.",
            ["queue"], registry=r)
        self.claims = Counter("switchboard_claims", "Committed claims (each opens an attempt).", ["queue"], registry=r)
        self.transitions = Counter(
            "switchboard_transitions", "Committed todo transitions, by queue and kind.", ["queue", "kind"], registry=r)
        self.dead_letters = Counter("switchboard_dead_letters", "Todos dead-lettered.", ["queue"], registry=r)
        # Usage the closing calls reported (complete, fail, release with usage), counted like
        # the other counters after commit in the process that closed the attempt: a read of
        # the attempts at scrape would cost a scan of the history and go down when retention
        # deletes old todos, which a Prometheus counter must never do.
        self.attempt_tokens = Counter(
            "switchboard_attempt_tokens", "Tokens reported on closed attempts, by queue and kind (input, output).",
            ["queue", "kind"], registry=r)
        self.attempt_cost = Counter(
            "switchboard_attempt_cost_usd", "Cost in US dollars reported on closed attempts, by queue.",
            ["queue"], registry=r)
        self.todos = Gauge("switchboard_todos", "Todos by queue and state, read at scrape time.",
                           ["queue", "state"], registry=r)
        self.mcp_calls = Histogram(
            "switchboard_mcp_call_duration_seconds", "MCP tool calls, by tool and result code.",
            ["tool", "code"], registry=r,
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5))
        # Questions to people. The gauge is the sum of
        # switchboard_todos over the two interrupt states, under a name an alert reads as
        # meant, with every queue that has todos present at 0; the histogram is observed once
        # per question, at its first answer (the store's "answered" transition).
        self.waiting_for_person = Gauge(
            "switchboard_todos_waiting_for_person",
            "Todos interrupted for a person (input_required or auth_required), by queue, read at scrape time.",
            ["queue"], registry=r)
        self.question_answer = Histogram(
            "switchboard_question_answer_seconds", "Seconds from an agent's question to its first answer, by queue.",
            ["queue"], registry=r, buckets=QUESTION_ANSWER_BUCKETS)
        # The claim's order (migration 0015): todos waiting for their run_at (also counted in
        # switchboard_todos as pending), and each limited queue's limit beside what it holds,
        # per owner (a limit is a person's), so an alert can test held >= limit.
        self.todos_scheduled = Gauge(
            "switchboard_todos_scheduled",
            "Pending todos waiting for their run_at (a subset of pending), by queue, read at scrape time.",
            ["queue"], registry=r)
        self.todos_waiting = Gauge(
            "switchboard_todos_waiting",
            "Pending todos waiting for the todos named in their after (a subset of pending), by queue, read at "
            "scrape time.", ["queue"], registry=r)
        self.queue_limit = Gauge(
            "switchboard_queue_limit", "The most todos of the queue its owner lets be held at once, read at scrape time.",
            ["queue", "user"], registry=r)
        self.queue_limit_held = Gauge(
            "switchboard_queue_limit_held",
            "Todos of a limited queue held now (claimed or waiting for a person), read at scrape time.",
            ["queue", "user"], registry=r)
        # Schedules (migration 0017): ticks that added a todo, and ticks skipped (the previous
        # todo still live without overlap, or no live endpoint granted the queue).
        self.schedule_ticks_added = Gauge(
            "switchboard_schedule_ticks_added",
            "Schedule ticks that added a todo, summed over the queue's schedules, read at scrape time.",
            ["queue"], registry=r)
        self.schedule_ticks_skipped = Gauge(
            "switchboard_schedule_ticks_skipped",
            "Schedule ticks skipped (the previous todo still live, or no live endpoint granted the queue), "
            "summed over the queue's schedules, read at scrape time.",
            ["queue"], registry=r)
        self.sse_subscribers = Gauge("switchboard_sse_subscribers", "Open Board live-update streams.", registry=r)
        self.watched_humans = Gauge(
            "switchboard_watched_humans",
            "Humans this process has a live listener for (a Board stream, an MCP doorway): their transitions notify.",
            registry=r)
        self.chart_fold_lag = Gauge(
            "switchboard_chart_fold_lag_seconds",
            "How far the charts' fold is behind now, read at scrape time: about 10 while it keeps up; "
            "a running transaction holds it back (+Inf before the first fold).", registry=r)
        self.queue_paused = Gauge(
            "switchboard_queue_paused", "Owners who have paused the queue (0: live for everyone), read at scrape time.",
            ["queue"], registry=r)

    def queue_label(self, queue: str) -> str:
        with self._lock:
            if queue in self._queues:
                return queue
            if len(self._queues) < self.settings.metrics_queue_label_max:
                self._queues.add(queue)
                return queue
        return OTHER_QUEUES

    def observe(self, t: Transition) -> None:
        """The store's committed-transition observer."""
        if t.kind == "deleted":
            return
        queue = self.queue_label(t.queue)
        self.transitions.labels(queue, t.kind).inc()
        if t.kind == "claimed":
            self.claims.labels(queue).inc()
        if t.closed is not None:
            outcome = t.closed["outcome"]
            self.attempts_closed.labels(queue, outcome).inc()
            if t.closed["died"]:
                self.lease_expired.labels(queue).inc()
            usage = t.closed.get("usage")
            if usage:
                for kind in ("input", "output"):
                    if usage.get(f"{kind}_tokens") is not None:
                        self.attempt_tokens.labels(queue, kind).inc(usage[f"{kind}_tokens"])
                if usage.get("cost_usd") is not None:
                    self.attempt_cost.labels(queue).inc(float(usage["cost_usd"]))
        if t.dead_letter and t.state == "failed":
            self.dead_letters.labels(queue).inc()
        if t.kind == "answered" and t.waited_seconds is not None:
            self.question_answer.labels(queue).observe(max(0.0, t.waited_seconds))

    def observe_call(self, tool: str, code: str, seconds: float) -> None:
        self.mcp_calls.labels(tool, code).observe(seconds)

    async def render(self, store) -> bytes:
        counts: dict[tuple[str, str], int] = {}
        for row in await store.queue_state_counts():
            key = (self.queue_label(row["queue"]), row["state"])
            counts[key] = counts.get(key, 0) + int(row["n"])
        self.todos.clear()
        for (queue, state), n in counts.items():
            self.todos.labels(queue, state).set(n)
        waiting = dict.fromkeys((queue for queue, _ in counts), 0)
        for (queue, state), n in counts.items():
            if state in WAITING_STATES:
                waiting[queue] += n
        self.waiting_for_person.clear()
        for queue, n in waiting.items():
            self.waiting_for_person.labels(queue).set(n)
        # Every queue with todos is 0 unless paused (so an alert can test for 1), or unless
        # some of its todos wait for their run_at.
        self._set_per_queue(self.queue_paused, counts, await store.queue_paused_counts())
        self._set_per_queue(self.todos_scheduled, counts, await store.queue_scheduled_counts())
        self._set_per_queue(self.todos_waiting, counts, await store.queue_waiting_counts())
        limits: dict[tuple[str, str], list[int]] = {}
        for row in await store.queue_limits_held():
            key = (self.queue_label(row["queue"]), row["username"])
            limit = limits.setdefault(key, [0, 0])
            limit[0] += int(row["max_held"])
            limit[1] += int(row["held"])
        self.queue_limit.clear()
        self.queue_limit_held.clear()
        for (queue, user), (most, held) in limits.items():
            self.queue_limit.labels(queue, user).set(most)
            self.queue_limit_held.labels(queue, user).set(held)
        ticks: dict[str, list[int]] = {}
        for row in await store.queue_schedule_ticks():
            tick = ticks.setdefault(self.queue_label(row["queue"]), [0, 0])
            tick[0] += int(row["added"])
            tick[1] += int(row["skipped"])
        self.schedule_ticks_added.clear()
        self.schedule_ticks_skipped.clear()
        for queue, (added, skipped) in ticks.items():
            self.schedule_ticks_added.labels(queue).set(added)
            self.schedule_ticks_skipped.labels(queue).set(skipped)
        self.chart_fold_lag.set(await store.outcomes_fold_lag())
        return generate_latest(self.registry)

    def _set_per_queue(self, gauge: Gauge, counts: dict[tuple[str, str], int], rows: list[dict]) -> None:
        """Set a per-queue gauge from (queue, n) rows, every queue with todos present at 0."""
        per_queue = dict.fromkeys((queue for queue, _ in counts), 0)
        for row in rows:
            label = self.queue_label(row["queue"])
            per_queue[label] = per_queue.get(label, 0) + int(row["n"])
        gauge.clear()
        for queue, n in per_queue.items():
            gauge.labels(queue).set(n)

    def route(self):
        metrics = self

        @get("/metrics", include_in_schema=False)
        async def metrics_endpoint(request: Request) -> Response:
            token = metrics.settings.metrics_token
            if token:
                given = request.headers.get("authorization", "")
                if not hmac.compare_digest(given.encode(), f"Bearer {token}".encode()):
                    return Response(b"metrics need the operator token\n", status_code=401,
                                    media_type="text/plain", headers={"WWW-Authenticate": "Bearer"})
            runtime = request.app.state.runtime
            metrics.sse_subscribers.set(runtime.fanout.subscriber_count)
            metrics.watched_humans.set(len(runtime.fanout.presence.held()))
            try:
                body = await metrics.render(runtime.store)
            except Unavailable as err:  # the todo gauges need the database
                return Response(b"the database is unavailable\n", status_code=503, media_type="text/plain",
                                headers={"Retry-After": str(err.retry_after_seconds)})
            return Response(body, media_type=CONTENT_TYPE_LATEST)

        return metrics_endpoint
