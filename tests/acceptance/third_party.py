"""MCP clients nobody here wrote, driven against a real server: the official TypeScript SDK
client (through tests/clients/ts_sdk_driver.mjs) and the MCP Inspector CLI. Both come from
the npm registry at the versions pinned in tests/clients/package-lock.json, installed by
scripts/test.sh into tests/clients/node_modules."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import AsyncIterator

CLIENTS = Path(__file__).resolve().parent.parent / "clients"
NODE_MODULES = CLIENTS / "node_modules"
DRIVER = CLIENTS / "ts_sdk_driver.mjs"
INSPECTOR = NODE_MODULES / ".bin" / "mcp-inspector"
# Generous: a cold Node start on a loaded 2-core machine. A deadline, never a measurement.
DEADLINE = 60.0


def node() -> str:
    path = shutil.which("node")
    assert path, "node is not on PATH; scripts/test.sh needs Node and npm for the client compatibility tests"
    assert DRIVER.exists() and INSPECTOR.exists(), (
        f"{NODE_MODULES} is missing the pinned clients: run scripts/test.sh (it runs npm ci there)")
    return path


class Threw(Exception):
    """The TypeScript client threw instead of returning a result (what a host sees as a crash)."""

    def __init__(self, error: dict):
        super().__init__(f"{error.get('name')} {error.get('code')}: {error.get('message')}")
        self.error = error


@dataclass
class TsClient:
    """One TypeScript SDK Client over Streamable HTTP, in its own Node process."""

    proc: asyncio.subprocess.Process
    info: dict | None = None

    async def request(self, op: str, **fields):
        line = json.dumps({"op": op, **fields}) + "\n"
        self.proc.stdin.write(line.encode())
        await self.proc.stdin.drain()
        raw = await asyncio.wait_for(self.proc.stdout.readline(), timeout=DEADLINE)
        if not raw:
            stderr = (await self.proc.stderr.read()).decode(errors="replace")
            raise AssertionError(f"the TypeScript driver exited: {stderr[-2000:]}")
        answer = json.loads(raw)
        if not answer["ok"]:
            raise Threw(answer["error"])
        return answer["value"]

    async def list_tools(self) -> list[dict]:
        return (await self.request("listTools"))["tools"]

    async def call_tool(self, name: str, arguments: dict | None = None) -> dict:
        """The CallToolResult as the client returned it (camelCase JSON), or Threw."""
        return await self.request("callTool", name=name, arguments=arguments or {})


@contextlib.asynccontextmanager
async def ts_client(server, token: str | None, *, list_tools: bool = True,
                    capabilities: dict | None = None, headers: dict | None = None) -> AsyncIterator[TsClient]:
    """Connect as an agent host does: connect, then list the tools (which is when the SDK
    compiles each tool's output schema and starts validating results against it)."""
    proc = await asyncio.create_subprocess_exec(
        node(), str(DRIVER), cwd=CLIENTS, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE, limit=1 << 22)  # one JSON line per reply; tools/list is long
    client = TsClient(proc)
    try:
        headers = dict(headers or {}) | ({"Authorization": f"Bearer {token}"} if token is not None else {})
        client.info = await client.request("connect", url=server.url + "/mcp", headers=headers,
                                           **({"capabilities": capabilities} if capabilities else {}))
        if list_tools:
            await client.list_tools()
        yield client
    finally:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(client.request("close"), timeout=10)
        if proc.returncode is None:
            proc.kill()
        await proc.wait()


def ok(result: dict) -> dict:
    """A successful result's structured content, checked against its JSON text."""
    assert not result.get("isError"), result
    assert json.loads(result["content"][0]["text"]) == result["structuredContent"]
    return result["structuredContent"]


def tool_error(result: dict) -> dict:
    """An error result's body: isError, no structured content, the JSON body as its one text."""
    assert result.get("isError") is True, result
    assert "structuredContent" not in result, result
    assert [c["type"] for c in result["content"]] == ["text"], result
    return json.loads(result["content"][0]["text"])["error"]


# -- the MCP Inspector CLI -----------------------------------------------------------------

@dataclass
class Ran:
    returncode: int
    stdout: str
    stderr: str

    def json(self):
        return json.loads(self.stdout)


async def inspector(server, token: str, era: str, *args: str, tmp_path: Path) -> Ran:
    """Run `mcp-inspector --cli` against the server with a bearer header. The protocol era
    (legacy: 2025-11-25 with a session; modern: pinned to 2026-07-28; auto: the Inspector
    probes) is a per-server setting of its config file, so each run writes one."""
    node()
    config = tmp_path / f"inspector-{era}.json"
    config.write_text(json.dumps({"mcpServers": {"switchboard": {
        "type": "streamable-http", "url": server.url + "/mcp",
        "headers": {"Authorization": f"Bearer {token}"}, "protocolEra": era}}}))
    env = {**os.environ, "MCP_INSPECTOR_SECRET_STORE": "memory", "HOME": str(tmp_path),
           "NO_COLOR": "1"}
    proc = await asyncio.create_subprocess_exec(
        str(INSPECTOR), "--cli", "--config", str(config), "--server", "switchboard", *args, cwd=CLIENTS, env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    try:
        out, err = await asyncio.wait_for(proc.communicate(), timeout=DEADLINE)
    except asyncio.TimeoutError:
        proc.kill()
        await proc.wait()
        raise AssertionError(f"mcp-inspector {' '.join(args)} did not finish within {DEADLINE} s") from None
    return Ran(proc.returncode, out.decode(errors="replace"), err.decode(errors="replace"))
