"""A JSON HTTP server on 127.0.0.1 standing in for a pod's port behind a port-forward: Ray's dashboard and job
API (8265) or Ray Serve's OpenAI API (8000). Routes map (method, path) to (status, body); requests are
recorded. `connector` is what the CLI state's port-forward hook returns: a socket to this server, so the
commands' local port-forward relay carries the traffic as it would the Kubernetes stream."""

from __future__ import annotations

import json
import socket
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

# serve_forever notices shutdown() only at its next poll (every 0.5 s by default), so each test that stops a
# server waited up to half a second in its teardown.
SHUTDOWN_POLL_S = 0.01


def serve_in_background(server: ThreadingHTTPServer) -> threading.Thread:
    """Serve on a daemon thread, polling for shutdown() every SHUTDOWN_POLL_S."""
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": SHUTDOWN_POLL_S}, daemon=True)
    thread.start()
    return thread


def serve_locally(handler: type[BaseHTTPRequestHandler]) -> ThreadingHTTPServer:
    """`handler` on a free port of 127.0.0.1, served in the background."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    serve_in_background(server)
    return server


def stop_serving(server: ThreadingHTTPServer | None) -> None:
    if server is not None:
        server.shutdown()
        server.server_close()


@dataclass
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    body: Any


@dataclass
class FakeHttp:
    routes: dict[tuple[str, str], tuple[int, Any]] = field(default_factory=dict)
    requests: list[Recorded] = field(default_factory=list)
    forwarded: list[tuple[str, str, int]] = field(default_factory=list)  # (namespace, pod, port) per connection
    server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def connector(self, namespace: str, pod: str, port: int) -> socket.socket:
        assert self.server is not None
        self.forwarded.append((namespace, pod, port))
        return socket.create_connection(("127.0.0.1", self.server.server_address[1]))

    def start(self) -> FakeHttp:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                url = urlsplit(self.path)
                headers = {key.lower(): value for key, value in self.headers.items()}
                fake.requests.append(Recorded(self.command, self.path, headers, json.loads(raw) if raw else None))
                status, body = fake.routes.get((self.command, url.path), (404, {"error": {"message": "no route"}}))
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = _handle

        self.server = serve_locally(Handler)
        return self

    def stop(self) -> None:
        stop_serving(self.server)
