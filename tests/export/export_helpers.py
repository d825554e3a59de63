"""Shared by the export tests: a config file for a real gateway over tests/servers/testserver.py.

A helper module rather than a conftest.py: several test directories import
`conftest` by name, and another conftest.py module would make that ambiguous.
"""

from __future__ import annotations

import sys
from pathlib import Path

TESTSERVER = Path(__file__).resolve().parents[1] / "servers" / "testserver.py"


def write_ts_config(directory: Path) -> Path:
    """A TOML config with one stdio backend, `ts`, running the test server."""
    path = directory / "toolweave.toml"
    path.write_text(
        "[[backends]]\n"
        'name = "ts"\n'
        f"command = {_toml_literal(sys.executable)}\n"
        f"args = [{_toml_literal(str(TESTSERVER))}]\n",
        encoding="utf-8",
    )
    return path


def _toml_literal(value: str) -> str:
    """A TOML literal string: no escapes, so Windows paths keep their backslashes."""
    return f"'{value}'"
