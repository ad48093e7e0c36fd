"""A local port forwarded to a pod's port through the Kubernetes API (what `kubectl port-forward` does), with
the official client's websocket port-forward (kubernetes.stream.portforward): a listener on 127.0.0.1, and
for each connection to it one port-forward stream to the pod, bytes copied both ways.

The Ray dashboard and job API (8265) and Ray Serve (8000) stay ClusterIP behind the namespace's
NetworkPolicies; this is how `skyrl-hp dashboard`, `ray submit`, `verify` and `serve query` reach them.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Callable
from typing import Any

from .kube import Cluster, KubeError

BUFFER = 65536


def pod_connector(cluster: Cluster, namespace: str, pod: str, port: int) -> Callable[[], Any]:
    """A function returning a new socket-like stream to `pod`:`port` per call."""

    def connect() -> Any:
        from kubernetes import client
        from kubernetes.stream import portforward

        core = client.CoreV1Api(cluster.api_client)
        try:
            forward = portforward(core.connect_get_namespaced_pod_portforward, pod, namespace, ports=str(port))
        except Exception as error:  # the websocket upgrade refused (RBAC, pod gone)
            raise KubeError(f"port-forward to {namespace}/{pod}:{port} failed: {error}") from None
        return forward.socket(port)

    return connect


class LocalForward:
    """Listens on 127.0.0.1:`local_port` (0: any free port) and relays every connection through `connect()`."""

    def __init__(self, connect: Callable[[], Any], local_port: int = 0):
        self._connect = connect
        self._server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._server.bind(("127.0.0.1", local_port))
        self._server.listen(16)
        self._closed = threading.Event()
        self.errors: list[str] = []
        threading.Thread(target=self._accept, name="skyrl-hp port-forward", daemon=True).start()

    @property
    def port(self) -> int:
        return int(self._server.getsockname()[1])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                local, _ = self._server.accept()
            except OSError:
                return
            try:
                remote = self._connect()
            except Exception as error:
                self.errors.append(str(error))
                local.close()
                continue
            for source, target in ((local, remote), (remote, local)):
                threading.Thread(target=_pump, args=(source, target), daemon=True).start()

    def close(self) -> None:
        self._closed.set()
        self._server.close()

    def __enter__(self) -> LocalForward:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _pump(source: Any, target: Any) -> None:
    try:
        while True:
            data = source.recv(BUFFER)
            if not data:
                break
            target.sendall(data)
    except OSError:
        pass
    finally:
        for end, how in ((target, socket.SHUT_WR), (source, socket.SHUT_RD)):
            with contextlib.suppress(OSError):
                end.shutdown(how)
