"""The request signing to a SageMaker MLflow App, which cannot run here against AWS: sagemaker-mlflow's plugin, as MLflow
loads it for an `arn:` tracking URI (its `mlflow.request_auth_provider` and `mlflow.request_header_provider` entry
points), signs a request to a local HTTP server. The request must carry the App's ARN header and a SigV4
signature scoped to the ARN's region and the `sagemaker` service, which botocore recomputes from the received
request. What stays unproven: that AWS accepts it (the endpoint, the Pod Identity credentials, the IAM action)."""

from __future__ import annotations

from importlib.metadata import entry_points

import mlflow
import pytest
import requests
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

APP_ARN = "arn:aws:sagemaker:us-west-2:111111111111:mlflow-app/app-abc123"


def plugin(group: str):
    (entry,) = [entry for entry in entry_points(group=group) if entry.name == "arn"]
    return entry.load()()


@pytest.fixture
def app_uri(fake_aws_env):
    mlflow.set_tracking_uri(APP_ARN)
    yield APP_ARN
    mlflow.set_tracking_uri(None)


def test_a_request_to_the_app_is_signed_for_its_arn(app_uri, http):
    http.routes[("POST", "/api/2.0/mlflow/runs/log-metric")] = (200, {})
    auth = plugin("mlflow.request_auth_provider").get_auth()
    headers = plugin("mlflow.request_header_provider").request_headers()
    assert headers == {"x-sm-mlflow-app-arn": APP_ARN}
    body = b'{"run_id": "r", "key": "reward/avg_raw_reward", "value": 0.5, "step": 1}'
    url = f"{http.url}/api/2.0/mlflow/runs/log-metric"
    response = requests.post(url, data=body, headers=headers, auth=auth, timeout=10)
    assert response.status_code == 200

    (received,) = http.requests
    sent = {name.lower(): value for name, value in received.headers.items()}
    assert sent["x-sm-mlflow-app-arn"] == APP_ARN
    algorithm, _, fields = sent["authorization"].partition(" ")
    assert algorithm == "AWS4-HMAC-SHA256"
    parts = dict(field.strip().split("=", 1) for field in fields.split(","))
    key, date, region, service, terminal = parts["Credential"].split("/")
    assert (key, region, service, terminal) == ("testing", "us-west-2", "sagemaker", "aws4_request")
    assert sent["x-amz-date"].startswith(date)
    signed = parts["SignedHeaders"].split(";")
    assert "host" in signed and "x-amz-date" in signed

    # botocore, given the request as the server received it, computes the same signature.
    request = AWSRequest(method="POST", url=url, data=body, headers={name: sent[name] for name in signed})
    request.context["timestamp"] = sent["x-amz-date"]
    signer = SigV4Auth(Credentials("testing", "testing"), "sagemaker", "us-west-2")
    expected = signer.signature(signer.string_to_sign(request, signer.canonical_request(request)), request)
    assert parts["Signature"] == expected
