"""An https server on 127.0.0.1 for client ID metadata documents in tests.

    async with DocumentServer() as docs:
        url = docs.serve_client("/client.json", client_name="Host")   # a good document
        docs.serve("/raw.json", json_body={...}, headers={"Cache-Control": "max-age=60"})
        docs.redirect("/old.json", docs.url("/client.json"))
        docs.hits("/client.json")                                      # requests seen
        docs.request_headers("/client.json")                           # the last one's headers

Its certificate is issued by a throwaway trustme CA for 127.0.0.1, localhost and ::1; a
fetcher trusts it through docs.ca_pem_path (a PEM file). The server runs its own event loop
in a thread, so it answers however busy the test's loop is. It speaks just enough HTTP/1.1
for a GET: one request a connection, then Connection: close. A path not served answers 404.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import ssl
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path

import trustme

# The same loopback redirect URI as tests/acceptance/oauth_helpers.py's REDIRECT.
REDIRECT = "http://127.0.0.1:9/callback"
_REASONS = {200: "OK", 301: "Moved Permanently", 302: "Found", 303: "See Other", 307: "Temporary Redirect",
            308: "Permanent Redirect", 400: "Bad Request", 404: "Not Found", 500: "Internal Server Error"}


@dataclass
class Reply:
    """What a path answers. delay: seconds before the status line; body_delay: seconds
    between the headers and the body; chunked: the body in chunks with no Content-Length."""

    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    body_delay: float = 0.0
    chunked: bool = False


class DocumentServer:
    def __init__(self, host: str = "127.0.0.1"):
        self.host = host
        self.port = 0
        self._ca = trustme.CA()
        self._cert = self._ca.issue_cert("127.0.0.1", "localhost", "::1")
        self._dir = tempfile.TemporaryDirectory(prefix="sb-docs-")
        self.ca_pem_path = str(Path(self._dir.name) / "ca.pem")
        self._ca.cert_pem.write_to_path(self.ca_pem_path)
        self._replies: dict[str, Reply] = {}
        self._hits: dict[str, int] = {}
        self._heads: dict[str, dict[str, str]] = {}
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: asyncio.AbstractServer | None = None
        self._handlers: set[asyncio.Task] = set()

    # -- configuring ------------------------------------------------------------------------

    def url(self, path: str, host: str | None = None) -> str:
        """The https URL of path here; host may be "localhost" to go through name resolution."""
        return f"https://{host or self.host}:{self.port}{path}"

    def serve(self, path: str, *, json_body: object = None, body: bytes | str | None = None, status: int = 200,
              headers: dict[str, str] | None = None, content_type: str | None = None, delay: float = 0.0,
              body_delay: float = 0.0, chunked: bool = False) -> str:
        """Answer GET path (exactly as requested, query included) with this; returns its URL."""
        if json_body is not None:
            data = json.dumps(json_body).encode()
            content_type = content_type or "application/json"
        elif isinstance(body, str):
            data = body.encode()
        else:
            data = body or b""
        all_headers = {"Content-Type": content_type} if content_type else {}
        all_headers.update(headers or {})
        with self._lock:
            self._replies[path] = Reply(status, data, all_headers, delay, body_delay, chunked)
        return self.url(path)

    def document(self, path: str, *, host: str | None = None, **metadata) -> dict:
        """A good client metadata document for path: client_id its URL, a loopback redirect
        URI, public client; metadata overrides or adds fields (None drops one)."""
        doc = {"client_id": self.url(path, host), "client_name": "Test Host", "redirect_uris": [REDIRECT],
               "grant_types": ["authorization_code", "refresh_token"], "response_types": ["code"],
               "token_endpoint_auth_method": "none"}
        doc.update(metadata)
        return {k: v for k, v in doc.items() if v is not None}

    def serve_client(self, path: str, *, headers: dict[str, str] | None = None, host: str | None = None,
                     **metadata) -> str:
        """Serve a good document (see document()) at path; returns its URL, the client id."""
        self.serve(path, json_body=self.document(path, host=host, **metadata), headers=headers)
        return self.url(path, host)

    def redirect(self, path: str, location: str, status: int = 302) -> str:
        return self.serve(path, status=status, headers={"Location": location})

    def hits(self, path: str) -> int:
        with self._lock:
            return self._hits.get(path, 0)

    def request_headers(self, path: str) -> dict[str, str]:
        """The headers of the last request for path, names in lower case."""
        with self._lock:
            return dict(self._heads.get(path, {}))

    # -- running ----------------------------------------------------------------------------

    def start(self) -> None:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self.host, 0))
        sock.listen(64)
        self.port = sock.getsockname()[1]
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self._cert.configure_cert(context)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="document-server", daemon=True)
        self._thread.start()

        async def listen():
            self._server = await asyncio.start_server(self._handle, sock=sock, ssl=context,
                                                      ssl_handshake_timeout=30)

        asyncio.run_coroutine_threadsafe(listen(), self._loop).result(timeout=30)

    def stop(self) -> None:
        if self._loop is None:
            return

        async def close():
            if self._server is not None:
                self._server.close()
            for task in list(self._handlers):
                task.cancel()
            await asyncio.gather(*self._handlers, return_exceptions=True)

        try:
            asyncio.run_coroutine_threadsafe(close(), self._loop).result(timeout=30)
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            assert self._thread is not None
            self._thread.join(timeout=30)
            self._loop.close()
            self._loop = None
            self._dir.cleanup()

    def __enter__(self) -> "DocumentServer":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    async def __aenter__(self) -> "DocumentServer":
        await asyncio.to_thread(self.start)
        return self

    async def __aexit__(self, *exc) -> None:
        await asyncio.to_thread(self.stop)

    # -- answering --------------------------------------------------------------------------

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._handlers.add(task)
        try:
            await self._answer(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ssl.SSLError):
            pass  # the client went away, or sent no request
        finally:
            self._handlers.discard(task)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _answer(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        request_line, *header_lines = head.decode("latin-1").split("\r\n")
        method, target, _ = (request_line.split(" ") + ["", ""])[:3]
        headers = {}
        for line in header_lines:
            name, sep, value = line.partition(":")
            if sep:
                headers[name.strip().lower()] = value.strip()
        with self._lock:
            self._hits[target] = self._hits.get(target, 0) + 1
            self._heads[target] = headers
            reply = self._replies.get(target) if method == "GET" else None
        if reply is None:
            reply = Reply(status=404 if method == "GET" else 405, body=b"not served")
        if reply.delay:
            await asyncio.sleep(reply.delay)
        lines = [f"HTTP/1.1 {reply.status} {_REASONS.get(reply.status, 'Status')}"]
        lines += [f"{k}: {v}" for k, v in reply.headers.items()]
        lines.append("Transfer-Encoding: chunked" if reply.chunked else f"Content-Length: {len(reply.body)}")
        lines.append("Connection: close")
        writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
        await writer.drain()
        if reply.body_delay:
            await asyncio.sleep(reply.body_delay)
        if not reply.chunked:
            writer.write(reply.body)
        else:
            for i in range(0, len(reply.body), 16 * 1024):
                piece = reply.body[i:i + 16 * 1024]
                writer.write(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
                await writer.drain()
            writer.write(b"0\r\n\r\n")
        await writer.drain()
