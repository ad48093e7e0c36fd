"""Kubernetes' name rules, one place for each: k8s.io/apimachinery/pkg/util/validation/validation.go
(IsDNS1123Label, IsDNS1123Subdomain, IsDNS1035Label), https://kubernetes.io/docs/concepts/overview/working-with-objects/names/.
"""

from __future__ import annotations

DNS1123_LABEL_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"  # most names: namespaces, service accounts
DNS1123_SUBDOMAIN_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
DNS1035_LABEL_PATTERN = r"^[a-z]([-a-z0-9]*[a-z0-9])?$"  # Services: a letter first
