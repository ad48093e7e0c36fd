"""MLflow's REST API on 127.0.0.1 over a real MLflow file store, for the read calls `train metrics` makes.

`train metrics` takes an http(s) tracking URI (tracking.tracking_uri accepts nothing else) and reads through
MLflow's own RestStore. The test environment has mlflow-skinny, whose file store needs no server but which carries
no `mlflow server` (that needs the full `mlflow` package and Flask; the drill runs one). So this answers the three
endpoints the client calls (mlflow/store/tracking/rest_store.py: GetExperimentByName, SearchRuns, GetMetricHistory,
paths from mlflow/protos/service.proto) by calling the same methods of MLflow's FileStore and returning MLflow's
own response messages, as mlflow/server/handlers.py does. The data is what SkyRL's logger wrote to the store.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from fake_http import serve_locally, stop_serving
from mlflow.entities import ViewType
from mlflow.protos.databricks_pb2 import RESOURCE_DOES_NOT_EXIST, ErrorCode
from mlflow.protos.service_pb2 import GetExperimentByName, GetMetricHistory, SearchRuns
from mlflow.store.tracking.file_store import FileStore
from mlflow.utils.proto_json_utils import message_to_json, parse_dict

API = "/api/2.0/mlflow"


@dataclass
class MlflowRest:
    root: str  # the file store's directory
    requests: list[tuple[str, dict[str, str]]] = field(default_factory=list)  # (path, lower-case headers) each
    server: ThreadingHTTPServer | None = None

    @property
    def paths(self) -> list[str]:
        return [path for path, _ in self.requests]

    @property
    def url(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def answer(self, method: str, path: str, query: dict[str, list[str]], body: dict[str, Any]) -> tuple[int, str]:
        store = FileStore(self.root)
        one = {key: values[0] for key, values in query.items()}
        if (method, path) == ("GET", f"{API}/experiments/get-by-name"):
            experiment = store.get_experiment_by_name(one["experiment_name"])
            if experiment is None:
                error = {"error_code": ErrorCode.Name(RESOURCE_DOES_NOT_EXIST), "message": "no such experiment"}
                return 404, json.dumps(error)
            return 200, message_to_json(GetExperimentByName.Response(experiment=experiment.to_proto()))
        if (method, path) == ("POST", f"{API}/runs/search"):
            request = SearchRuns()
            parse_dict(body, request)
            runs = store.search_runs(
                list(request.experiment_ids),
                request.filter,
                int(request.run_view_type) or ViewType.ACTIVE_ONLY,  # the proto's values are ViewType's
                request.max_results,
                list(request.order_by),
                request.page_token or None,
            )
            response = SearchRuns.Response(runs=[run.to_proto() for run in runs])
            if runs.token:
                response.next_page_token = runs.token
            return 200, message_to_json(response)
        if (method, path) == ("GET", f"{API}/metrics/get-history"):
            history = store.get_metric_history(
                one["run_id"],
                one["metric_key"],
                int(one["max_results"]) if "max_results" in one else None,
                one.get("page_token") or None,
            )
            response = GetMetricHistory.Response(metrics=[metric.to_proto() for metric in history])
            if history.token:
                response.next_page_token = history.token
            return 200, message_to_json(response)
        return 404, json.dumps({"error_code": "ENDPOINT_NOT_FOUND", "message": f"{method} {path}"})

    def start(self) -> MlflowRest:
        rest = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _handle(self, method: str) -> None:
                url = urlsplit(self.path)
                rest.requests.append((url.path, {key.lower(): value for key, value in self.headers.items()}))
                length = int(self.headers.get("content-length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}") if length else {}
                status, text = rest.answer(method, url.path, parse_qs(url.query), body)
                data = text.encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                self._handle("GET")

            def do_POST(self) -> None:
                self._handle("POST")

        self.server = serve_locally(Handler)
        return self

    def stop(self) -> None:
        stop_serving(self.server)
