"""The `mcpServers` JSON that MCP clients keep (Claude Desktop, Cursor, Claude Code; VS Code calls it
`servers`), read as toolweave backends.

`toolweave init` writes a starter config from it, and a config file that holds it (and no `backends`)
is read as a config with those servers as its backends, so `toolweave serve -c claude_desktop_config.json`
serves the servers a client already has. Client files may hold comments and trailing commas (VS Code's
JSONC), which `loads_jsonc` accepts.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from toolweave.fields import BACKEND_NAME_RE
from toolweave.problems import Problem

SERVER_KEYS = ("mcpServers", "servers")
"""Where clients keep their servers: `mcpServers` (Claude Desktop, Cursor, Claude Code), `servers` (VS Code)."""
REMOTE_TYPES = frozenset({"http", "streamable-http", "streamableHttp"})


def servers_of(document: Any) -> Mapping[str, Any] | None:
    """The document's server table, or None when it holds none (or is a toolweave config)."""
    if not isinstance(document, Mapping) or "backends" in document:
        return None
    for key in SERVER_KEYS:
        servers = document.get(key)
        if isinstance(servers, Mapping):
            return servers
    return None


def backend_name(server: str, taken: set[str]) -> str:
    """A valid, unused backend name for a client's server name (`My Files` → `my-files`)."""
    base = re.sub(r"[^a-z0-9_-]+", "-", server.lower()).strip("-_")[:29] or "server"
    if not base[0].isalnum():
        base = f"s{base}"[:29]
    name, counter = base, 2
    while name in taken:
        name = f"{base}-{counter}"
        counter += 1
    taken.add(name)
    return name


def backends_from_servers(
    servers: Mapping[str, Any], path: str = "mcpServers"
) -> tuple[list[dict[str, Any]], list[Problem]]:
    """Each server as a `[[backends]]` entry; a server toolweave cannot serve is a problem, not an entry."""
    backends: list[dict[str, Any]] = []
    problems: list[Problem] = []
    taken: set[str] = set()
    for server, entry in servers.items():
        where = f"{path}.{server}"
        if not isinstance(entry, Mapping):
            problems.append(Problem(where, "a server must be an object with 'command' or 'url'"))
            continue
        if entry.get("disabled") is True:
            continue
        kind = entry.get("type")
        backend: dict[str, Any] = {"name": backend_name(str(server), taken)}
        if isinstance(entry.get("command"), str) and kind in (None, "stdio"):
            backend["command"] = entry["command"]
            for key in ("args", "env", "cwd"):
                if entry.get(key):
                    backend[key] = entry[key]
        elif isinstance(entry.get("url"), str) and (kind is None or kind in REMOTE_TYPES):
            backend["url"] = entry["url"]
            if entry.get("headers"):
                backend["headers"] = entry["headers"]
        elif kind == "sse":
            problems.append(Problem(where, "the legacy SSE transport is not supported; use streamable HTTP"))
            continue
        else:
            problems.append(Problem(where, "a server needs 'command' (stdio) or 'url' (streamable HTTP)"))
            continue
        if not BACKEND_NAME_RE.match(backend["name"]):  # cannot happen: backend_name makes a valid one
            problems.append(Problem(where, f"cannot make a backend name from {server!r}"))
            continue
        backends.append(backend)
    return backends, problems


def loads_jsonc(text: str) -> Any:
    """JSON with `//` and `/* */` comments and trailing commas (what VS Code and others accept)."""
    return json.loads(_without_trailing_commas(_without_comments(text)))


def _without_comments(text: str) -> str:
    out: list[str] = []
    index, length, in_string = 0, len(text), False
    while index < length:
        char = text[index]
        if in_string:
            out.append(char)
            if char == "\\" and index + 1 < length:
                out.append(text[index + 1])
                index += 1
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
            out.append(char)
        elif text.startswith("//", index):
            newline = text.find("\n", index)
            index = length if newline < 0 else newline
            continue
        elif text.startswith("/*", index):
            end = text.find("*/", index + 2)
            index = length if end < 0 else end + 2
            continue
        else:
            out.append(char)
        index += 1
    return "".join(out)


_SPACE = re.compile(r"\s*")


def _without_trailing_commas(text: str) -> str:
    out: list[str] = []
    in_string = escaped = False
    for index, char in enumerate(text):
        if in_string:
            in_string = not (char == '"' and not escaped)
            escaped = char == "\\" and not escaped
        elif char == '"':
            in_string = True
        elif char == ",":
            after = _SPACE.match(text, index + 1)
            following = text[after.end() : after.end() + 1] if after else ""
            if following in ("}", "]"):
                continue
        out.append(char)
    return "".join(out)
