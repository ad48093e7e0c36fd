"""A Kubernetes API server stand-in on 127.0.0.1 for the cluster commands' tests.

The commands talk to it through the official `kubernetes` client (its ApiClient, REST layer and urllib3),
exactly as to a real cluster; only the server is fake. It keeps objects by their API path, answers GET
(one object, or a list filtered by label selector), server-side apply (PATCH: stores the body, as the
API server does for a new object), DELETE, and pod logs; every request is recorded for the tests to check.
Stand-in because no Kubernetes API server runs here (no kind, no container engine).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from fake_http import serve_locally, stop_serving


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]  # lower-case names
    body: Any


@dataclass
class FakeKube:
    objects: dict[str, dict[str, Any]] = field(default_factory=dict)  # API path -> object
    logs: dict[str, str] = field(default_factory=dict)  # "<namespace>/<pod>" -> log text
    requests: list[Request] = field(default_factory=list)
    # Called after each apply with (path, stored object): lets a test play the operator (status updates).
    on_apply: Callable[[str, dict[str, Any]], None] | None = None
    # Called with each request before it is answered: lets a test change the cluster as time passes (a
    # controller or the garbage collector acting between two polls).
    on_request: Callable[[Request], None] | None = None
    server: ThreadingHTTPServer | None = None

    @property
    def host(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def put(self, path: str, obj: dict[str, Any]) -> None:
        self.objects[path] = obj

    def applied(self) -> list[str]:
        return [r.path for r in self.requests if r.method == "PATCH"]

    def deleted(self) -> list[str]:
        return [r.path for r in self.requests if r.method == "DELETE"]

    def api_client(self) -> Any:
        from kubernetes import client

        configuration = client.Configuration()
        configuration.host = self.host
        configuration.api_key = {"BearerToken": "test-token"}
        configuration.api_key_prefix = {"BearerToken": "Bearer"}
        return client.ApiClient(configuration)

    def start(self) -> FakeKube:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # keep the test output clean
                pass

            def _reply(self, status: int, body: Any, content_type: str = "application/json") -> None:
                data = body if isinstance(body, bytes) else json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _handle(self) -> None:
                url = urlsplit(self.path)
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                body = json.loads(raw) if raw else None
                query = parse_qs(url.query)
                headers = {key.lower(): value for key, value in self.headers.items()}
                request = Request(self.command, url.path, query, headers, body)
                fake.requests.append(request)
                if fake.on_request:
                    fake.on_request(request)
                path = url.path.rstrip("/")
                if self.command == "PATCH":
                    assert isinstance(body, dict)
                    fake.objects[path] = body
                    if fake.on_apply:
                        fake.on_apply(path, body)
                    return self._reply(200, fake.objects[path])
                if self.command == "DELETE":
                    if fake.objects.pop(path, None) is None:
                        return self._reply(404, {"kind": "Status", "message": f"{path} not found", "code": 404})
                    return self._reply(200, {"kind": "Status", "status": "Success"})
                if path.endswith("/log"):
                    namespace, pod = path.split("/")[4], path.split("/")[6]
                    text = fake.logs.get(f"{namespace}/{pod}")
                    if text is None:
                        return self._reply(404, {"kind": "Status", "message": f"pod {pod} not found", "code": 404})
                    return self._reply(200, text.encode(), "text/plain")
                if path in fake.objects:
                    return self._reply(200, fake.objects[path])
                prefix = path + "/"
                items = [
                    obj
                    for key, obj in sorted(fake.objects.items())
                    if key.startswith(prefix) and "/" not in key[len(prefix) :]
                ]
                if items or _is_collection(path):
                    selector = query.get("labelSelector", [""])[0]
                    return self._reply(200, {"kind": "List", "items": [i for i in items if _selected(i, selector)]})
                return self._reply(404, {"kind": "Status", "message": f"{path} not found", "code": 404})

            do_GET = do_PATCH = do_DELETE = do_POST = _handle

        self.server = serve_locally(Handler)
        return self

    def stop(self) -> None:
        stop_serving(self.server)


COLLECTIONS = ("pods", "events", "nodes", "rayjobs", "rayclusters", "rayservices", "jobs", "secrets", "services", "daemonsets",
               "deployments", "persistentvolumeclaims")  # fmt: skip


def _is_collection(path: str) -> bool:
    return path.rsplit("/", 1)[-1] in COLLECTIONS


def _selected(obj: dict[str, Any], selector: str) -> bool:
    labels = (obj.get("metadata") or {}).get("labels") or {}
    for term in filter(None, selector.split(",")):
        key, _, value = term.partition("=")
        if labels.get(key) != value:
            return False
    return True


def pod(name: str, namespace: str, labels: dict[str, str], *, ready: bool = True, node: str = "") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": labels,
            "creationTimestamp": "2026-11-20T10:00:00Z",
        },
        "spec": {"nodeName": node},
        "status": {
            "phase": "Running" if ready else "Pending",
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }
