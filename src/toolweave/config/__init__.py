"""Config: typed models, loading TOML/YAML, env expansion, all-errors validation."""

from toolweave.composite.fanout.config import FanoutDef, FanoutTarget
from toolweave.composite.router.config import RouterDef
from toolweave.composite.workflow.config import WorkflowDef
from toolweave.config.loader import load_config, parse_composite, parse_config
from toolweave.config.models import BackendConfig, Config, GatewayConfig, PolicyConfig, ToolOverride
from toolweave.fields import Duration, parse_duration, split_tool_ref
from toolweave.problems import ConfigError, ConfigIssue

__all__ = [
    "BackendConfig",
    "Config",
    "ConfigError",
    "ConfigIssue",
    "Duration",
    "FanoutDef",
    "FanoutTarget",
    "GatewayConfig",
    "PolicyConfig",
    "RouterDef",
    "ToolOverride",
    "WorkflowDef",
    "load_config",
    "parse_composite",
    "parse_config",
    "parse_duration",
    "split_tool_ref",
]
