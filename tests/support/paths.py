"""Where things are: the test MCP servers, the console script, the in-process Python backends."""

from __future__ import annotations

import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
ROOT = TESTS.parent
SERVERS = TESTS / "servers"
TESTSERVER = SERVERS / "testserver.py"
RELAYSERVER = SERVERS / "relayserver.py"
"""Tools that need the client mid-call (sampling, elicitation, roots, logging) and a completing prompt."""
HEADERSERVER = SERVERS / "headerserver.py"
APISERVER = SERVERS / "apiserver.py"
"""A REST API with its own OpenAPI document (tests/servers/apiserver_openapi.yaml), for HTTP API backends."""
PYTHON = sys.executable
BIN = Path(sys.executable).parent
TIME_SERVER = BIN / "mcp-server-time"
TOOLWEAVE = BIN / "toolweave"
PYTOOLS = "tw_pytools"
"""The in-process test module (`tests/servers/tw_pytools.py`) for `python = "..."` backends;
`tests/servers` is on the import path (pytest's `pythonpath`, `processes.subprocess_env`)."""
