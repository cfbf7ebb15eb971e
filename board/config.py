"""Settings, read once from the environment (the names are the design's contract)."""

from __future__ import annotations

import ipaddress
import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from urllib.parse import urlsplit

from board.errors import Invalid
from board.logs import FORMATS as LOG_FORMATS


def _bool(name: str, raw: str) -> bool:
    value = raw.strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off", ""):
        return False
    raise Invalid(f"{name} must be true or false, not {raw!r}", argument=name)


def _number(name: str, raw: str, kind=float, minimum: float | None = None):
    try:
        value = kind(raw)
    except ValueError:
        raise Invalid(f"{name} must be a number, not {raw!r}", argument=name) from None
    if minimum is not None and value < minimum:
        raise Invalid(f"{name} must be at least {minimum}, not {raw!r}", argument=name)
    return value


def check_hook_url(url: str) -> str:
    """A hook target must be https, or plain http on the loopback interface."""
    parts = urlsplit(url)
    loopback = parts.hostname in ("127.0.0.1", "localhost", "::1")
    if parts.scheme == "https" and parts.hostname or parts.scheme == "http" and loopback:
        return url
    raise Invalid(f"hook URL {url!r} must be https, or http on 127.0.0.1, localhost or ::1",
                  argument="SWITCHBOARD_HOOK_URLS")


def check_public_url(url: str) -> str:
    """The public base URL: https (or http on loopback), no query or fragment; kept without
    a trailing slash."""
    parts = urlsplit(url.strip())
    loopback = parts.hostname in ("127.0.0.1", "localhost", "::1")
    if not (parts.scheme == "https" and parts.hostname or parts.scheme == "http" and loopback) \
            or parts.query or parts.fragment:
        raise Invalid(f"SWITCHBOARD_PUBLIC_URL {url!r} must be an https URL (or http on 127.0.0.1, localhost "
                      "or ::1) with no query or fragment", argument="SWITCHBOARD_PUBLIC_URL")
    return url.strip().rstrip("/")


def check_trusted_proxies(raw: str) -> tuple[str, ...]:
    """SWITCHBOARD_TRUSTED_PROXIES: a comma list of IP addresses or CIDR networks, each kept
    as its normal form."""
    out = []
    for item in (i.strip() for i in raw.split(",")):
        if not item:
            continue
        try:
            out.append(str(ipaddress.ip_network(item, strict=False)) if "/" in item else
                       str(ipaddress.ip_address(item)))
        except ValueError:
            raise Invalid(f"SWITCHBOARD_TRUSTED_PROXIES: {item!r} is not an IP address or CIDR network",
                          argument="SWITCHBOARD_TRUSTED_PROXIES") from None
    return tuple(out)


@dataclass(frozen=True)
class Settings:
    database_url: str | None = None
    # Where the one LISTEN connection of a process goes, when DATABASE_URL is a transaction
    # pooler (PgBouncer) that cannot hold a LISTEN: a direct connection to the same database.
    listen_database_url: str | None = None
    # Server-side prepared statements (psycopg prepares a statement after its fifth run). Off
    # behind a transaction pooler that cannot carry them across its connections (PgBouncer
    # before 1.21, or without max_prepared_statements).
    prepared_statements: bool = True
    data_dir: Path = Path(".switchboard")
    secret_key: str | None = None
    attempt_summary_from_result: bool = False
    attempt_history_max_per_todo: int = 50
    # Notes kept per attempt; past it the oldest are deleted and counted (notes_pruned).
    attempt_notes_max: int = 100
    # Derived liveness of an open attempt (board/store/liveness.py): quiet once no activity was
    # heard for this fraction of the lease last set; an ended lease is overdue, and lapsed
    # once it has been over for this many seconds.
    liveness_quiet_fraction: float = 0.5
    liveness_lapsed_seconds: float = 30.0
    lease_seconds: float = 60.0
    lease_seconds_max: float = 3600.0
    retry_base_seconds: float = 10.0
    retry_max_seconds: float = 3600.0
    reaper_interval_seconds: float = 5.0
    retry_interval_seconds: float = 1.0
    retention_days: float = 30.0
    retention_interval_seconds: float = 60.0
    audit_retention_days: float = 365.0  # the record of human actions, apart from todos'
    rate_limit_per_second: float = 50.0
    rate_limit_burst: int = 100
    metrics_queue_label_max: int = 50
    metrics_token: str | None = None
    allowed_hosts: tuple[str, ...] = field(default_factory=lambda: ("127.0.0.1:*", "localhost:*", "[::1]:*"))
    doorbell_gate_seconds: float = 60.0
    doorbell_heartbeat_seconds: float = 30.0
    doorbell_ring_margin: int = 1
    doorbell_rering_seconds: float = 1.0
    # MCP (board/mcp/server.py): Origin values allowed on /mcp; empty means http:// and
    # https:// of each allowed host. Long-lived MCP streams re-check their bearer token this
    # often, so a revoked endpoint stops hearing the doorbell.
    allowed_origins: tuple[str, ...] = ()
    mcp_auth_recheck_seconds: float = 30.0
    # How long a call waits for the database before it is answered unavailable (503).
    db_wait_seconds: float = 5.0
    # On SIGTERM or SIGINT (board/app.py): /readyz answers 503 at once; the process keeps
    # serving for the delay (so a balancer's health check sees it first), then stops
    # accepting, ends its live streams and gives the calls in flight up to the grace.
    shutdown_delay_seconds: float = 0.0
    shutdown_grace_seconds: float = 10.0
    hook_urls: tuple[str, ...] = ()
    hook_secret: str | None = None
    hook_poll_seconds: float = 0.5
    hook_retry_base_seconds: float = 2.0
    hook_retry_max_seconds: float = 600.0
    # board/logs.py: "text" (one escaped line a record) or "json" (one JSON object a line).
    log_format: str = "text"
    # The server's public base URL (scheme, host and any path prefix, no trailing slash): the
    # OAuth issuer, and the base of /mcp's resource URL. Unset: taken from each request's Host.
    public_url: str | None = None
    # The peers whose X-Forwarded-For (and X-Forwarded-Proto) is believed, IPs or CIDRs: the
    # client's address (the access log, the registration and sign-in limits) is then the
    # right-most untrusted forwarded one. None: every peer is the client itself.
    trusted_proxies: tuple[str, ...] = ()
    # OAuth for MCP hosts (board/oauth/): on unless turned off; then /mcp takes vended tokens only.
    oauth_enabled: bool = True
    oauth_access_token_seconds: int = 3600
    oauth_refresh_token_seconds: int = 30 * 24 * 3600
    # A refresh token presented again this soon after its rotation gets the same new pair
    # (two windows of one host refreshing at once); later, it revokes the grant.
    oauth_refresh_grace_seconds: float = 10.0
    oauth_registrations_per_minute: float = 10.0
    # Client ID metadata documents: an extra CA bundle to trust when fetching them, and whether
    # their hosts may be private or loopback addresses (tests only; never in production).
    oauth_client_metadata_ca_file: str | None = None
    oauth_client_metadata_allow_private: bool = False
    # The A2UI todo detail resource (switchboard://todos/{id}/a2ui, board/mcp/todo_views.py):
    # listed, readable and subscribable only when on.
    a2ui_enabled: bool = False

    def with_(self, **changes) -> "Settings":
        return replace(self, **changes)


def from_env(env: dict[str, str] | None = None) -> Settings:
    env = dict(os.environ if env is None else env)
    s = Settings()
    get = env.get
    changes: dict = {}
    if get("DATABASE_URL"):
        changes["database_url"] = get("DATABASE_URL")
    if get("SWITCHBOARD_LISTEN_DATABASE_URL"):
        changes["listen_database_url"] = get("SWITCHBOARD_LISTEN_DATABASE_URL")
    if get("SWITCHBOARD_DATA_DIR"):
        changes["data_dir"] = Path(get("SWITCHBOARD_DATA_DIR"))
    if get("SWITCHBOARD_SECRET_KEY"):
        changes["secret_key"] = get("SWITCHBOARD_SECRET_KEY")
    if "SWITCHBOARD_A2UI" in env:
        changes["a2ui_enabled"] = _bool("SWITCHBOARD_A2UI", env["SWITCHBOARD_A2UI"])
    if "SWITCHBOARD_ATTEMPT_SUMMARY_FROM_RESULT" in env:
        changes["attempt_summary_from_result"] = _bool(
            "SWITCHBOARD_ATTEMPT_SUMMARY_FROM_RESULT", env["SWITCHBOARD_ATTEMPT_SUMMARY_FROM_RESULT"]
        )
    numbers = {
        "SWITCHBOARD_ATTEMPT_HISTORY_MAX_PER_TODO": ("attempt_history_max_per_todo", int, 5),
        "SWITCHBOARD_ATTEMPT_NOTES_MAX": ("attempt_notes_max", int, 1),
        "SWITCHBOARD_LIVENESS_QUIET_FRACTION": ("liveness_quiet_fraction", float, 0.01),
        "SWITCHBOARD_LIVENESS_LAPSED_SECONDS": ("liveness_lapsed_seconds", float, 0),
        "SWITCHBOARD_LEASE_SECONDS": ("lease_seconds", float, 1),
        "SWITCHBOARD_LEASE_SECONDS_MAX": ("lease_seconds_max", float, 1),
        "SWITCHBOARD_RETRY_BASE_SECONDS": ("retry_base_seconds", float, 0),
        "SWITCHBOARD_RETRY_MAX_SECONDS": ("retry_max_seconds", float, 0),
        "SWITCHBOARD_REAPER_INTERVAL_SECONDS": ("reaper_interval_seconds", float, 0),
        "SWITCHBOARD_RETRY_INTERVAL_SECONDS": ("retry_interval_seconds", float, 0),
        "SWITCHBOARD_RETENTION_DAYS": ("retention_days", float, 0),
        "SWITCHBOARD_RETENTION_INTERVAL_SECONDS": ("retention_interval_seconds", float, 0),
        "SWITCHBOARD_AUDIT_RETENTION_DAYS": ("audit_retention_days", float, 0),
        "SWITCHBOARD_RATE_LIMIT_PER_SECOND": ("rate_limit_per_second", float, 0),
        "SWITCHBOARD_RATE_LIMIT_BURST": ("rate_limit_burst", int, 1),
        "SWITCHBOARD_METRICS_QUEUE_LABEL_MAX": ("metrics_queue_label_max", int, 1),
        "SWITCHBOARD_DOORBELL_GATE_SECONDS": ("doorbell_gate_seconds", float, 0),
        "SWITCHBOARD_DOORBELL_HEARTBEAT_SECONDS": ("doorbell_heartbeat_seconds", float, 0),
        "SWITCHBOARD_DOORBELL_RING_MARGIN": ("doorbell_ring_margin", int, 0),
        "SWITCHBOARD_DOORBELL_RERING_SECONDS": ("doorbell_rering_seconds", float, 0),
        "SWITCHBOARD_HOOK_POLL_SECONDS": ("hook_poll_seconds", float, 0.05),
        "SWITCHBOARD_HOOK_RETRY_BASE_SECONDS": ("hook_retry_base_seconds", float, 0),
        "SWITCHBOARD_HOOK_RETRY_MAX_SECONDS": ("hook_retry_max_seconds", float, 0),
        "SWITCHBOARD_MCP_AUTH_RECHECK_SECONDS": ("mcp_auth_recheck_seconds", float, 1),
        "SWITCHBOARD_DB_WAIT_SECONDS": ("db_wait_seconds", float, 0.5),
        "SWITCHBOARD_SHUTDOWN_DELAY_SECONDS": ("shutdown_delay_seconds", float, 0),
        "SWITCHBOARD_SHUTDOWN_GRACE_SECONDS": ("shutdown_grace_seconds", float, 0),
    }
    for name, (attr, kind, minimum) in numbers.items():
        if get(name):
            changes[attr] = _number(name, env[name], kind, minimum)
    if changes.get("liveness_quiet_fraction", 0) > 1:
        raise Invalid("SWITCHBOARD_LIVENESS_QUIET_FRACTION must be at most 1, not "
                      f"{env['SWITCHBOARD_LIVENESS_QUIET_FRACTION']!r}", argument="SWITCHBOARD_LIVENESS_QUIET_FRACTION")
    if get("SWITCHBOARD_METRICS_TOKEN"):
        changes["metrics_token"] = get("SWITCHBOARD_METRICS_TOKEN")
    if get("SWITCHBOARD_ALLOWED_HOSTS"):
        changes["allowed_hosts"] = tuple(h.strip() for h in env["SWITCHBOARD_ALLOWED_HOSTS"].split(",") if h.strip())
    if get("SWITCHBOARD_ALLOWED_ORIGINS"):
        changes["allowed_origins"] = tuple(o.strip() for o in env["SWITCHBOARD_ALLOWED_ORIGINS"].split(",") if o.strip())
    if get("SWITCHBOARD_HOOK_URLS"):
        changes["hook_urls"] = tuple(u.strip() for u in env["SWITCHBOARD_HOOK_URLS"].split(",") if u.strip())
        for url in changes["hook_urls"]:
            check_hook_url(url)
        if not get("SWITCHBOARD_HOOK_SECRET"):
            raise Invalid("SWITCHBOARD_HOOK_SECRET must be set when SWITCHBOARD_HOOK_URLS is",
                          argument="SWITCHBOARD_HOOK_SECRET")
    if get("SWITCHBOARD_HOOK_SECRET"):
        changes["hook_secret"] = get("SWITCHBOARD_HOOK_SECRET")
    if get("SWITCHBOARD_LOG_FORMAT"):
        raw = env["SWITCHBOARD_LOG_FORMAT"]
        if raw.strip().lower() not in LOG_FORMATS:
            raise Invalid(f"SWITCHBOARD_LOG_FORMAT must be text or json, not {raw!r}", argument="SWITCHBOARD_LOG_FORMAT")
        changes["log_format"] = raw.strip().lower()
    if get("SWITCHBOARD_PUBLIC_URL"):
        changes["public_url"] = check_public_url(env["SWITCHBOARD_PUBLIC_URL"])
    if get("SWITCHBOARD_TRUSTED_PROXIES"):
        changes["trusted_proxies"] = check_trusted_proxies(env["SWITCHBOARD_TRUSTED_PROXIES"])
    if "SWITCHBOARD_PREPARED_STATEMENTS" in env:
        changes["prepared_statements"] = _bool("SWITCHBOARD_PREPARED_STATEMENTS",
                                               env["SWITCHBOARD_PREPARED_STATEMENTS"])
    if "SWITCHBOARD_OAUTH" in env:
        changes["oauth_enabled"] = _bool("SWITCHBOARD_OAUTH", env["SWITCHBOARD_OAUTH"])
    oauth_numbers = {
        "SWITCHBOARD_OAUTH_ACCESS_TOKEN_SECONDS": ("oauth_access_token_seconds", int, 60, 3600),
        "SWITCHBOARD_OAUTH_REFRESH_TOKEN_SECONDS": ("oauth_refresh_token_seconds", int, 300, 365 * 24 * 3600),
        "SWITCHBOARD_OAUTH_REGISTRATIONS_PER_MINUTE": ("oauth_registrations_per_minute", float, 0, None),
        "SWITCHBOARD_OAUTH_REFRESH_GRACE_SECONDS": ("oauth_refresh_grace_seconds", float, 0, 60),
    }
    for name, (attr, kind, minimum, maximum) in oauth_numbers.items():
        if get(name):
            value = _number(name, env[name], kind, minimum)
            if maximum is not None and value > maximum:
                raise Invalid(f"{name} must be at most {maximum}, not {env[name]!r}", argument=name)
            changes[attr] = value
    if get("SWITCHBOARD_OAUTH_CLIENT_METADATA_CA_FILE"):
        changes["oauth_client_metadata_ca_file"] = get("SWITCHBOARD_OAUTH_CLIENT_METADATA_CA_FILE")
    if "SWITCHBOARD_OAUTH_CLIENT_METADATA_ALLOW_PRIVATE" in env:
        changes["oauth_client_metadata_allow_private"] = _bool(
            "SWITCHBOARD_OAUTH_CLIENT_METADATA_ALLOW_PRIVATE", env["SWITCHBOARD_OAUTH_CLIENT_METADATA_ALLOW_PRIVATE"])
    return s.with_(**changes)
