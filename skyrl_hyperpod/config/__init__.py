"""One typed configuration for the CDK app, the cdk8s app, the image build and the tooling."""

from ..plumbing.errors import ConfigError
from .catalog import INSTANCE_CATALOG, InstanceSpec, instance_spec
from .loader import CONFIG_ENV_VAR, load_config, read_yaml, validate_config
from .project import ProjectConfig

__all__ = [
    "CONFIG_ENV_VAR",
    "INSTANCE_CATALOG",
    "ConfigError",
    "InstanceSpec",
    "ProjectConfig",
    "instance_spec",
    "load_config",
    "read_yaml",
    "validate_config",
]
