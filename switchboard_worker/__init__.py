"""Switchboard's worker: `switchboard work -- COMMAND` and the async `Worker` it is built on.

A client of the Switchboard server over MCP (the official MCP Python SDK); it imports nothing
of the server, so it installs alone (worker/pyproject.toml, docs/worker.md)."""

from switchboard_worker.connection import Closed, Lost, Refused, ToolError
from switchboard_worker.worker import Todo, Worker

__all__ = ["Closed", "Lost", "Refused", "Todo", "ToolError", "Worker"]
