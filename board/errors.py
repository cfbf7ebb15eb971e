"""The one error hierarchy. Each error has a stable wire code and the HTTP status the Board answers it with."""

from __future__ import annotations


class SwitchboardError(Exception):
    code = "internal"
    http_status = 500

    def __init__(self, message: str, *, argument: str | None = None, op: str | None = None, todo_id: str | None = None):
        super().__init__(message)
        self.message = message
        self.argument = argument
        self.op = op
        self.todo_id = todo_id

    def wire(self) -> dict:
        """The body an agent reads. Never carries the operation or the todo id (REQ-10)."""
        body = {"code": self.code, "message": self.message}
        if self.argument is not None:
            body["argument"] = self.argument
        return {"error": body}

    def __str__(self) -> str:
        # The wrapped form for logs and tracebacks: operation and todo id (REQ-19).
        where = " ".join(p for p in (self.op and f"op={self.op}", self.todo_id and f"todo={self.todo_id}") if p)
        return f"{self.code}: {self.message}" + (f" [{where}]" if where else "")


class NotFound(SwitchboardError):
    code = "not_found"
    http_status = 404

    def __init__(self, message: str = "no such todo", **kw):
        super().__init__(message, **kw)


class Conflict(SwitchboardError):
    code = "conflict"
    http_status = 409


class Invalid(SwitchboardError):
    code = "invalid"
    http_status = 400


class Forbidden(SwitchboardError):
    code = "forbidden"
    http_status = 403


class RateLimited(SwitchboardError):
    code = "rate_limited"
    http_status = 429


class Unavailable(SwitchboardError):
    """The database could not be reached within the bounded wait. Retryable."""

    code = "unavailable"
    http_status = 503
    retry_after_seconds = 2

    def __init__(self, message: str = "the database is unavailable right now; retry in a few seconds", **kw):
        super().__init__(message, **kw)


class Internal(SwitchboardError):
    """A fault on our side; the caller learns nothing more, the log gets the detail."""

    def __init__(self, message: str = "internal error", **kw):
        super().__init__(message, **kw)

