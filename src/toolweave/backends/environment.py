"""The environment a stdio backend's child process starts with.

Not the gateway's whole environment: it may hold the operator's secrets, which a
third-party MCP server has no business reading. Not only what the MCP SDK passes
either (`HOME`, `LOGNAME`, `PATH`, `SHELL`, `TERM`, `USER`): without the trust store,
proxy and locale settings of the machine, a server started by `uvx` or `npx` fails
to fetch its package (`invalid peer certificate`) or to reach its API. So a child
gets `INHERITED` (names that configure how programs reach the network and where
they keep files, never credentials of their own), the names its backend lists in
`env_passthrough` (glob patterns), then its own `env`, which wins.
"""

from __future__ import annotations

import fnmatch
import os
import sys
from collections.abc import Mapping, Sequence

INHERITED: frozenset[str] = frozenset(
    {
        # who and where: the MCP SDK passes these too
        "HOME",
        "LOGNAME",
        "USER",
        "SHELL",
        "TERM",
        "PATH",
        # locale and time
        "LANG",
        "LANGUAGE",
        "LC_ALL",
        "LC_CTYPE",
        "TZ",
        # temporary files and per-user folders
        "TMPDIR",
        "TEMP",
        "TMP",
        "XDG_CACHE_HOME",
        "XDG_CONFIG_HOME",
        "XDG_DATA_HOME",
        "XDG_STATE_HOME",
        "XDG_RUNTIME_DIR",
        # the machine's trust store: OpenSSL, Python requests/httpx, curl, Node
        "SSL_CERT_FILE",
        "SSL_CERT_DIR",
        "REQUESTS_CA_BUNDLE",
        "CURL_CA_BUNDLE",
        "NODE_EXTRA_CA_CERTS",
        # proxies, both spellings
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "NO_PROXY",
        "ALL_PROXY",
        "http_proxy",
        "https_proxy",
        "no_proxy",
        "all_proxy",
        # where uvx / pip / npx fetch packages and keep their caches
        "UV_CACHE_DIR",
        "UV_INDEX_URL",
        "UV_DEFAULT_INDEX",
        "UV_EXTRA_INDEX_URL",
        "UV_NATIVE_TLS",
        "UV_PYTHON_INSTALL_DIR",
        "UV_TOOL_DIR",
        "PIP_INDEX_URL",
        "PIP_EXTRA_INDEX_URL",
        "PIP_CERT",
        "NPM_CONFIG_REGISTRY",
        "NPM_CONFIG_CACHE",
        "NPM_CONFIG_CAFILE",
        "npm_config_registry",
        "npm_config_cache",
        "npm_config_cafile",
    }
)
"""Passed from the gateway's environment to every stdio backend (docs/configuration.md lists them)."""


def child_env(
    env: Mapping[str, str], passthrough: Sequence[str] = (), parent: Mapping[str, str] | None = None
) -> dict[str, str]:
    """`INHERITED` and the `passthrough` patterns' variables from `parent` (the gateway's environment),
    then the backend's own `env` over them; the gateway's own bin directory first on PATH unless `env`
    sets PATH, so `command = "python"` or `"mcp-server-time"` finds the programs installed next to
    toolweave (its virtualenv) even when it is not activated."""
    parent = os.environ if parent is None else parent
    found = {
        name: value
        for name, value in parent.items()
        if (name in INHERITED or any(fnmatch.fnmatchcase(name, pattern) for pattern in passthrough))
        and not value.startswith("()")  # an exported shell function, never data
    }
    found.update(env)
    if "PATH" not in env:
        bin_dir = os.path.dirname(sys.executable)
        found["PATH"] = os.pathsep.join([bin_dir, parent.get("PATH", os.defpath)])
    return found
