"""Starting toolweave for the benchmark: write a config, run `toolweave serve`, wait until ready.

The interface used (and nothing else): the console script `toolweave` next to the
running interpreter, invoked as `toolweave serve -c CONFIG --port PORT`, serving MCP
over streamable HTTP at `http://127.0.0.1:PORT/mcp` and exposing backend tools as
`backend__tool`. When the script is missing, its `serve` command fails, or the
server does not come up, scenarios that need it are skipped with the reason.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
from mcp import Client

from bench.procs import LOOPBACK, Managed, ProcessGroup, StartError, free_port, venv_bin, wait_port

READY_TIMEOUT_S = 60.0
LIST_GRACE_S = 5.0


class GatewayUnavailable(RuntimeError):
    """toolweave cannot be run yet (or failed to start); the message says why."""


@dataclass
class GatewayRun:
    managed: Managed
    url: str
    config_path: Path
    tools: frozenset[str] = frozenset()
    """The tool names it listed when it became ready."""

    @property
    def pid(self) -> int:
        return self.managed.pid


# ---------------------------------------------------------------- TOML writing


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, Mapping):
        inner = ", ".join(f"{_toml_key(k)} = {_toml_value(v)}" for k, v in value.items())
        return "{ " + inner + " }" if inner else "{}"
    if isinstance(value, Sequence):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    raise TypeError(f"cannot write {type(value).__name__} as TOML")


def _toml_key(key: str) -> str:
    return key if key.replace("_", "").replace("-", "").isalnum() else json.dumps(key)


def toml_dumps(document: Mapping[str, Any]) -> str:
    """TOML for a document of tables and arrays of tables whose values are written inline."""
    lines: list[str] = []
    for name, section in document.items():
        tables = section if isinstance(section, list) else [section]
        header = f"[[{name}]]" if isinstance(section, list) else f"[{name}]"
        for table in tables:
            lines.append(header)
            lines.extend(f"{_toml_key(k)} = {_toml_value(v)}" for k, v in table.items())
            lines.append("")
    return "\n".join(lines)


def write_config(
    path: Path,
    backends: Sequence[Mapping[str, Any]],
    composites: Sequence[Mapping[str, Any]] = (),
) -> Path:
    """Write a toolweave config with its own SQLite database next to it."""
    document: dict[str, Any] = {
        "gateway": {"database": f"sqlite:///{path.with_suffix('.db')}", "log_level": "warning"},
        "backends": list(backends),
    }
    if composites:
        document["composite_tools"] = list(composites)
    path.write_text(toml_dumps(document))
    return path


# ---------------------------------------------------------------- serving

_availability: dict[Path, str | None] = {}


def baseline_exe(tree: Path) -> Path:
    """The console script of another toolweave tree (`--baseline DIR`): its own virtualenv's."""
    return tree / ".venv" / "bin" / "toolweave"


def unavailable_reason(exe: Path | None = None) -> str | None:
    """Why `toolweave serve` (of `exe`, else this virtualenv's) cannot be used, or None when it can
    (checked once per executable)."""
    exe = exe or venv_bin("toolweave")
    if exe not in _availability:
        _availability[exe] = _check(exe)
    return _availability[exe]


def _check(exe: Path) -> str | None:
    if not exe.exists():
        return f"{exe} does not exist (is toolweave installed in that virtualenv?)"
    try:
        done = subprocess.run(
            [str(exe), "serve", "--help"], capture_output=True, text=True, timeout=60, check=False
        )
    except subprocess.TimeoutExpired:
        return "`toolweave serve --help` did not finish within 60 s"
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
        return f"`toolweave serve --help` exited {done.returncode}: {tail[0][:300]}"
    return None


async def _listed(url: str) -> set[str]:
    with anyio.fail_after(10):
        async with Client(url, cache=None) as client:
            return {tool.name for tool in (await client.list_tools()).tools}


async def _wait_tools(url: str, expected: Sequence[str], managed: Managed, wait_s: float) -> set[str]:
    """Wait until the gateway answers tools/list at all, then (briefly) until it lists `expected`.

    A gateway that answers but keeps missing a tool (say, a composite kind it does
    not serve yet) is given up on after LIST_GRACE_S instead of the whole wait.
    """
    deadline = time.monotonic() + wait_s
    missing: list[str] = list(expected)
    last_error = "no answer"
    while time.monotonic() < deadline and managed.alive():
        try:
            names = await _listed(url)
            missing = [name for name in expected if name not in names]
            if not missing:
                return names
            deadline = min(deadline, time.monotonic() + LIST_GRACE_S)
            last_error = "answers tools/list without them"
        except Exception as exc:  # noqa: BLE001 - not ready yet, whatever the reason
            last_error = f"{type(exc).__name__}: {exc}"
        await anyio.sleep(0.25)
    state = "running" if managed.alive() else f"exited {managed.proc.returncode}"
    raise GatewayUnavailable(
        f"toolweave ({state}) does not list {missing[:5]} ({last_error}); log tail:\n{managed.log_tail(1500)}"
    )


async def start_gateway(
    group: ProcessGroup,
    config_path: Path,
    expected_tools: Sequence[str],
    name: str = "toolweave",
    exe: Path | None = None,
) -> GatewayRun:
    """`toolweave serve -c CONFIG --port PORT` (of `exe`, else this virtualenv's), ready once it
    lists `expected_tools`."""
    reason = unavailable_reason(exe)
    if reason is not None:
        raise GatewayUnavailable(reason)
    port = free_port()
    argv = [str(exe or venv_bin("toolweave")), "serve", "-c", str(config_path), "--port", str(port)]
    managed = group.start(name, argv, cwd=config_path.parent)
    try:
        wait_port(managed, port, READY_TIMEOUT_S)
    except StartError as exc:
        raise GatewayUnavailable(f"`toolweave serve` failed to start: {exc}") from exc
    url = f"http://{LOOPBACK}:{port}/mcp"
    managed.url = url
    names = await _wait_tools(url, expected_tools, managed, READY_TIMEOUT_S)
    return GatewayRun(managed, url, config_path, frozenset(names))


def exposed(backend: str, tool: str) -> str:
    """The name toolweave exposes a backend tool under (default separator)."""
    return f"{backend}__{tool}"
