"""Config: typed models, loading TOML/YAML, env expansion, all-errors validation."""

from toolweave.config._base import Duration, parse_duration, split_tool_ref
from toolweave.config.errors import ConfigError, ConfigIssue
from toolweave.config.fanout import FanoutDef, FanoutTarget
from toolweave.config.loader import load_config, parse_composite, parse_config
from toolweave.config.models import BackendConfig, Config, GatewayConfig, PolicyConfig, ToolOverride
from toolweave.config.router import RouterDef
from toolweave.config.workflow import WorkflowDef

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
