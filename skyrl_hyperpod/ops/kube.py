"""The cluster through the official `kubernetes` Python client: connecting to the project's EKS cluster,
server-side apply of synthesized manifests, reading pods, logs and the KubeRay objects.

Connecting needs no kubectl and no AWS CLI: the endpoint and CA come from eks:DescribeCluster, and the
bearer token is what `aws eks get-token` makes, a presigned sts:GetCallerIdentity URL carrying the
cluster name in the `x-k8s-aws-id` header (aws-iam-authenticator's token format,
https://github.com/kubernetes-sigs/aws-iam-authenticator#api-authorization-from-outside-a-cluster).
"""

from __future__ import annotations

import base64
import contextlib
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from skyrl_hyperpod.plumbing.errors import ProjectError

FIELD_MANAGER = "skyrl-hp"
# What objects skyrl-hp creates itself (not from the synthesized manifests) are labelled with.
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY = "skyrl-hp"


def managed_labels(name_prefix: str) -> dict[str, str]:
    """The labels of an object skyrl-hp creates itself for the deployment `name_prefix`."""
    return {"app.kubernetes.io/part-of": name_prefix, MANAGED_BY_LABEL: MANAGED_BY}


TOKEN_PREFIX = "k8s-aws-v1."
# The API server accepts a token for 15 minutes after signing; the signature itself is valid for 60 s.
TOKEN_EXPIRES_SECONDS = 60
# A command that waits longer (train start --wait, up to 30 min) signs a new token before the old one expires.
TOKEN_REFRESH_SECONDS = 600
CLUSTER_NAME_HEADER = "x-k8s-aws-id"


class KubeError(ProjectError):
    """A cluster call that failed, as one line."""


def eks_token(session: Any, cluster_name: str, region: str) -> str:
    """The bearer token `aws eks get-token --cluster-name NAME` prints, from a boto3 session."""
    from botocore.signers import RequestSigner

    sts = session.client("sts", region_name=region)
    signer = RequestSigner(
        sts.meta.service_model.service_id, region, "sts", "v4", session.get_credentials(), session.events
    )
    url = signer.generate_presigned_url(
        {
            "method": "GET",
            "url": f"https://sts.{region}.amazonaws.com/?Action=GetCallerIdentity&Version=2011-06-15",
            "body": {},
            "headers": {CLUSTER_NAME_HEADER: cluster_name},
            "context": {},
        },
        region_name=region,
        expires_in=TOKEN_EXPIRES_SECONDS,
        operation_name="",
    )
    return TOKEN_PREFIX + base64.urlsafe_b64encode(url.encode()).decode().rstrip("=")


@dataclass(frozen=True)
class ClusterEndpoint:
    name: str
    arn: str
    endpoint: str
    certificate_authority: str  # base64 PEM, as EKS returns it
    public_access: bool
    public_access_cidrs: tuple[str, ...]


def describe_eks_cluster(eks: Any, cluster_name: str) -> ClusterEndpoint:
    cluster = eks.describe_cluster(name=cluster_name)["cluster"]
    vpc = cluster.get("resourcesVpcConfig") or {}
    return ClusterEndpoint(
        name=cluster["name"],
        arn=cluster["arn"],
        endpoint=cluster["endpoint"],
        certificate_authority=cluster["certificateAuthority"]["data"],
        public_access=bool(vpc.get("endpointPublicAccess")),
        public_access_cidrs=tuple(vpc.get("publicAccessCidrs") or ()),
    )


def api_client_for(
    endpoint: ClusterEndpoint, sign_token: Callable[[], str], refresh_after: float = TOKEN_REFRESH_SECONDS
) -> Any:
    """A kubernetes ApiClient for the EKS endpoint, trusting only the cluster's CA. `sign_token` makes a bearer
    token; the client asks for a new one before a request once the current one is `refresh_after` seconds old
    (the client's `refresh_api_key_hook` runs before every request)."""
    from kubernetes import client

    ca_file = tempfile.NamedTemporaryFile("wb", prefix="skyrl-hp-ca-", suffix=".crt", delete=False)  # noqa: SIM115
    with ca_file:
        ca_file.write(base64.b64decode(endpoint.certificate_authority))
    configuration = client.Configuration()
    configuration.host = endpoint.endpoint
    configuration.ssl_ca_cert = ca_file.name
    configuration.api_key = {"BearerToken": sign_token()}
    configuration.api_key_prefix = {"BearerToken": "Bearer"}
    signed_at = time.monotonic()

    def refresh(config: Any) -> None:
        nonlocal signed_at
        if time.monotonic() - signed_at >= refresh_after:
            try:
                config.api_key["BearerToken"] = sign_token()
            except Exception as error:  # botocore: credentials that expired or went away during a long wait
                raise KubeError(f"cannot sign a new EKS token (the old one expires): {error}") from None
            signed_at = time.monotonic()

    configuration.refresh_api_key_hook = refresh
    return client.ApiClient(configuration)


# --- manifests -----------------------------------------------------------------------------------------------

# Kinds the charts write: (API path prefix, plural, namespaced).
RESOURCES: dict[tuple[str, str], tuple[str, str, bool]] = {
    ("v1", "Namespace"): ("/api/v1", "namespaces", False),
    ("v1", "ServiceAccount"): ("/api/v1", "serviceaccounts", True),
    ("v1", "ConfigMap"): ("/api/v1", "configmaps", True),
    ("v1", "Secret"): ("/api/v1", "secrets", True),
    ("v1", "Service"): ("/api/v1", "services", True),
    ("v1", "PersistentVolume"): ("/api/v1", "persistentvolumes", False),
    ("v1", "PersistentVolumeClaim"): ("/api/v1", "persistentvolumeclaims", True),
    ("networking.k8s.io/v1", "NetworkPolicy"): ("/apis/networking.k8s.io/v1", "networkpolicies", True),
    ("batch/v1", "Job"): ("/apis/batch/v1", "jobs", True),
    ("ray.io/v1", "RayCluster"): ("/apis/ray.io/v1", "rayclusters", True),
    ("ray.io/v1", "RayJob"): ("/apis/ray.io/v1", "rayjobs", True),
    ("ray.io/v1", "RayService"): ("/apis/ray.io/v1", "rayservices", True),
}


def object_path(obj: dict[str, Any]) -> str:
    key = (str(obj.get("apiVersion")), str(obj.get("kind")))
    if key not in RESOURCES:
        raise KubeError(f"{key[1]} ({key[0]}) is not a kind skyrl-hp applies")
    prefix, plural, namespaced = RESOURCES[key]
    metadata = obj.get("metadata") or {}
    name = metadata["name"]
    if namespaced:
        return f"{prefix}/namespaces/{metadata['namespace']}/{plural}/{name}"
    return f"{prefix}/{plural}/{name}"


def describe(obj: dict[str, Any]) -> str:
    return f"{obj.get('kind')}/{(obj.get('metadata') or {}).get('name')}"


class Cluster:
    """The calls skyrl-hp makes, over one ApiClient (the real EKS one, or one pointed at a test server)."""

    def __init__(self, api_client: Any):
        self.api_client = api_client

    def _call(self, method: str, path: str, *, body: Any = None, query: list[tuple[str, Any]] | None = None,
              content_type: str = "application/json", stream: bool = False) -> Any:  # fmt: skip
        from kubernetes.client.rest import ApiException

        try:
            response = self.api_client.call_api(
                path,
                method,
                query_params=query or [],
                header_params={"Accept": "application/json", "Content-Type": content_type},
                body=body,
                auth_settings=["BearerToken"],
                _return_http_data_only=True,
                _preload_content=False,
            )
        except ApiException as error:
            raise KubeError(_api_error(method, path, error)) from None
        except KubeError:  # a new token could not be signed (api_client_for's refresh)
            raise
        except Exception as error:  # urllib3's connection and TLS errors
            raise KubeError(
                f"cannot reach the Kubernetes API at {self.api_client.configuration.host}: {error}"
            ) from None
        if stream:
            return response
        import json

        data = response.data
        return json.loads(data) if data else None

    def apply(self, obj: dict[str, Any]) -> dict[str, Any]:
        """Server-side apply (`kubectl apply --server-side --force-conflicts`): the object as synthesized wins."""
        applied: dict[str, Any] = self._call(
            "PATCH",
            object_path(obj),
            body=obj,
            query=[("fieldManager", FIELD_MANAGER), ("force", "true")],
            content_type="application/apply-patch+yaml",
        )
        return applied

    def get(self, obj_or_path: dict[str, Any] | str) -> dict[str, Any] | None:
        """The live object, or None when it does not exist."""
        path = obj_or_path if isinstance(obj_or_path, str) else object_path(obj_or_path)
        try:
            live: dict[str, Any] = self._call("GET", path)
        except KubeError as error:
            if " 404 " in f" {error} ":
                return None
            raise
        return live

    def delete(self, obj: dict[str, Any]) -> bool:
        """Delete in the background (dependents follow); False when it was already gone."""
        return self.delete_path(object_path(obj))

    def delete_path(self, path: str) -> bool:
        try:
            self._call("DELETE", path, body={"propagationPolicy": "Background"})
        except KubeError as error:
            if " 404 " in f" {error} ":
                return False
            raise
        return True

    def list_items(self, path: str, selector: str | None = None) -> list[dict[str, Any]]:
        query = [("labelSelector", selector)] if selector else []
        return list((self._call("GET", path, query=query) or {}).get("items") or [])

    def pods(self, namespace: str, selector: str) -> list[dict[str, Any]]:
        return self.list_items(f"/api/v1/namespaces/{namespace}/pods", selector)

    def nodes(self) -> list[dict[str, Any]]:
        return self.list_items("/api/v1/nodes")

    def logs(self, namespace: str, pod: str, *, follow: bool = False, tail: int | None = None,
             container: str | None = None, timestamps: bool = False) -> Iterator[str]:  # fmt: skip
        """The pod's log, line by line (streamed while the pod runs with `follow`); with `timestamps`, each line
        begins with the RFC 3339 time the kubelet received it."""
        query: list[tuple[str, Any]] = [("follow", "true" if follow else "false")]
        if timestamps:
            query.append(("timestamps", "true"))
        if tail is not None:
            query.append(("tailLines", tail))
        if container:
            query.append(("container", container))
        path = f"/api/v1/namespaces/{namespace}/pods/{pod}/log"
        response = self._call("GET", path, query=query, stream=True)
        from urllib3.exceptions import HTTPError

        try:
            yield from _lines(response.stream(4096))
        except HTTPError as error:  # the connection broke while the log streamed
            raise KubeError(f"GET {path}: the log stream broke: {error}") from None
        finally:
            response.release_conn()


def _lines(chunks: Iterable[bytes]) -> Iterator[str]:
    pending = b""
    for chunk in chunks:
        pending += chunk
        *complete, pending = pending.split(b"\n")
        for line in complete:
            yield line.decode("utf-8", errors="replace")
    if pending:
        yield pending.decode("utf-8", errors="replace")


def _api_error(method: str, path: str, error: Any) -> str:
    import json

    reason = error.reason
    with contextlib.suppress(TypeError, ValueError, AttributeError):
        reason = json.loads(error.body).get("message") or reason
    hint = ""
    if error.status == 401:
        hint = ": the token was refused (check the AWS credentials and region)"
    elif error.status == 403:
        hint = ": your IAM principal has no access; list it in eks.admin_principal_arns and redeploy"
    return f"{method} {path}: {error.status} {reason}{hint}"
