"""The config file: typed models, TOML/YAML loading, `${VAR}` expansion, every problem reported at once."""

from toolweave.config.loader import load_config, parse_config
from toolweave.config.models import BackendConfig, Config, GatewayConfig, PolicyConfig, ToolOverride
from toolweave.problems import ConfigError

__all__ = [
    "BackendConfig",
    "Config",
    "ConfigError",
    "GatewayConfig",
    "PolicyConfig",
    "ToolOverride",
    "load_config",
    "parse_config",
]
