"""`toolweave init` and `toolweave connect`: the MCP clients people already use.

`init` writes a starter `toolweave.toml` from a client's `mcpServers` (found where the client keeps it,
or given as a path). `connect CLIENT` adds the gateway to that client's configuration, over stdio (the
client starts `toolweave serve --stdio`) or HTTP (a running gateway, with its API key), keeping a copy
of the file it changes.

Both write only regular files, never through a symbolic link (a project's `.vscode/mcp.json` may be a
link someone committed, pointing anywhere; `init -o` to a dangling link would create its target): a
link is refused, and a file is replaced by a new one written beside it and renamed over it. A file
holding an API key is made readable by its owner only (0600).
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from toolweave.cli.common import err, load_config_or_exit, out


@dataclass(frozen=True, slots=True)
class Client:
    title: str
    key: str
    """Where its servers are: `mcpServers`, or `servers` (VS Code)."""
    remote_type: str | None
    """The `type` an HTTP entry carries (None: the URL alone says it)."""

    def places(self) -> list[Path]:
        return _PLACES[self.title]()


def _claude_desktop() -> list[Path]:
    home = Path.home()
    if sys.platform == "darwin":
        return [home / "Library/Application Support/Claude/claude_desktop_config.json"]
    if sys.platform == "win32":
        return [
            Path(os.environ.get("APPDATA", home / "AppData/Roaming")) / "Claude/claude_desktop_config.json"
        ]
    return [Path(os.environ.get("XDG_CONFIG_HOME", home / ".config")) / "Claude/claude_desktop_config.json"]


_PLACES: dict[str, Callable[[], list[Path]]] = {
    "Claude Desktop": _claude_desktop,
    "Cursor": lambda: [Path(".cursor/mcp.json"), Path.home() / ".cursor/mcp.json"],
    "VS Code": lambda: [Path(".vscode/mcp.json")],
    "Claude Code": lambda: [Path(".mcp.json"), Path.home() / ".claude.json"],
}
CLIENTS = {
    "claude-desktop": Client("Claude Desktop", "mcpServers", None),
    "cursor": Client("Cursor", "mcpServers", None),
    "vscode": Client("VS Code", "servers", "http"),
    "claude-code": Client("Claude Code", "mcpServers", "http"),
}


def client_or_exit(name: str) -> Client:
    found = CLIENTS.get(name.lower())
    if found is None:
        err.print(f"[red]unknown client {escape(name)!r}[/]; known: {', '.join(CLIENTS)}")
        raise typer.Exit(2)
    return found


def find_file(client: Client) -> Path | None:
    return next((path for path in client.places() if path.is_file()), None)


def read_json(path: Path) -> dict[str, Any]:
    from toolweave.config.mcp_servers import loads_jsonc

    try:
        document = loads_jsonc(path.read_text(encoding="utf-8")) if path.stat().st_size else {}
    except (OSError, ValueError) as error:
        err.print(f"[red]cannot read {escape(str(path))}:[/] {escape(str(error))}", soft_wrap=True)
        raise typer.Exit(1) from None
    if not isinstance(document, dict):
        err.print(f"[red]{escape(str(path))} is not a JSON object[/]")
        raise typer.Exit(1)
    return document


# -- init ----------------------------------------------------------------------------------------


def init(
    source: Annotated[
        str,
        typer.Argument(help=f"A client ({', '.join(CLIENTS)}) or the path of an mcpServers JSON file."),
    ],
    output: Annotated[Path, typer.Option("--output", "-o", help="The config to write.")] = Path(
        "toolweave.toml"
    ),
    force: Annotated[bool, typer.Option("--force", help="Overwrite the output file if it exists.")] = False,
) -> None:
    """Write a starter toolweave.toml from an MCP client's servers (Claude Desktop, Cursor, VS Code,
    Claude Code): each server becomes a backend."""
    from toolweave.config.mcp_servers import backends_from_servers, servers_of

    path = Path(source).expanduser()
    if not path.is_file():
        client = client_or_exit(source)
        found = find_file(client)
        if found is None:
            places = ", ".join(str(place) for place in client.places())
            err.print(
                f"[red]no {client.title} configuration found[/] (looked at {escape(places)})", soft_wrap=True
            )
            raise typer.Exit(1)
        path = found
    servers = servers_of(read_json(path))
    if not servers:
        err.print(f"[red]{escape(str(path))} lists no MCP servers[/] (no 'mcpServers' or 'servers' object)")
        raise typer.Exit(1)
    backends, problems = backends_from_servers(servers)
    for problem in problems:
        err.print(f"  [yellow]skipped[/] {escape(str(problem))}", highlight=False, soft_wrap=True)
    refuse_link(output)
    if output.exists() and not force:
        err.print(f"[red]{escape(str(output))} exists[/]; give --force to overwrite it or -o another path")
        raise typer.Exit(1)
    write_file(output, starter_toml(path, backends))
    out.print(
        f"wrote {escape(str(output))}: {len(backends)} backend(s) from {escape(str(path))}. "
        f"Next: toolweave validate -c {escape(str(output))}, then toolweave serve -c {escape(str(output))}",
        highlight=False,
        soft_wrap=True,
    )


def starter_toml(source: Path, backends: list[dict[str, Any]]) -> str:
    lines = [
        f"# Written by `toolweave init` from {source}.",
        "# Each MCP server of that file is a backend; its tools are served as <backend>__<tool>.",
        "",
        "[gateway]",
        'database = "sqlite:///toolweave.db"',
        "port = 8080",
    ]
    for backend in backends:
        lines += ["", "[[backends]]"]
        lines += [f"{key} = {_toml(value)}" for key, value in backend.items()]
    return "\n".join(lines) + "\n"


def _toml(value: Any) -> str:
    """Strings, lists of strings and flat tables of strings: all an mcpServers entry holds."""
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{toml_string(str(k))} = {_toml(v)}" for k, v in value.items()) + " }"
    if isinstance(value, list):
        return "[" + ", ".join(_toml(item) for item in value) + "]"
    return toml_string(str(value))


def toml_string(text: str) -> str:
    """A TOML basic string holding `text` exactly. TOML forbids raw control characters (U+0000-U+001F
    but tab, and DEL U+007F, which JSON leaves raw); those, the C1 controls and `"` and `\\` are escaped.
    A lone surrogate (a JSON `\\ud800`) is no Unicode scalar and cannot be written: it becomes U+FFFD."""
    out = ['"']
    for char in text:
        code = ord(char)
        if char in ('"', "\\"):
            out.append("\\" + char)
        elif code < 0x20 or 0x7F <= code <= 0x9F:
            out.append(f"\\u{code:04x}")
        elif 0xD800 <= code <= 0xDFFF:
            out.append("\\ufffd")
        else:
            out.append(char)
    out.append('"')
    return "".join(out)


# -- connect -------------------------------------------------------------------------------------


def connect(
    client_name: Annotated[str, typer.Argument(metavar="CLIENT", help=f"One of: {', '.join(CLIENTS)}.")],
    config: Annotated[
        Path | None,
        typer.Option("--config", "-c", help="The gateway's config (stdio: the client starts it)."),
    ] = None,
    http: Annotated[
        str | None,
        typer.Option("--http", help="Connect to a running gateway at this MCP URL instead of stdio."),
    ] = None,
    key: Annotated[
        str | None, typer.Option("--key", envvar="TOOLWEAVE_API_KEY", help="API key sent with --http.")
    ] = None,
    name: Annotated[
        str | None,
        typer.Option(
            "--name", help="The server's name in the client (default: toolweave, or toolweave-SERVER)."
        ),
    ] = None,
    file: Annotated[
        Path | None, typer.Option("--file", help="The client's config file (default: its usual place).")
    ] = None,
    server: Annotated[
        str | None,
        typer.Option("--server", help="A virtual server ([[servers]]) instead of the whole catalog."),
    ] = None,
) -> None:
    """Add the gateway to an MCP client's configuration (a copy of the file is kept next to it)."""
    from toolweave.config.loader import default_config_path

    if name is None:
        name = f"toolweave-{server}" if server else "toolweave"
    client = client_or_exit(client_name)
    path = file or find_file(client) or client.places()[0]
    refuse_link(path)
    document = read_json(path) if path.is_file() else {}
    servers = document.setdefault(client.key, {})
    if not isinstance(servers, dict):
        err.print(f"[red]{escape(str(path))}: '{client.key}' is not an object[/]")
        raise typer.Exit(1)
    if http:
        entry: dict[str, Any] = {"url": server_url(http, server) if server else http}
        if client.remote_type:
            entry = {"type": client.remote_type, **entry}
        if key:
            entry["headers"] = {"Authorization": f"Bearer {key}"}
    else:
        config_path = (config or default_config_path()).resolve()
        if not config_path.is_file():
            err.print(f"[red]config file not found: {escape(str(config_path))}[/] (give it with -c)")
            raise typer.Exit(1)
        if server is not None:
            _check_server(config_path, server)
        executable = shutil.which("toolweave") or str(Path(sys.executable).parent / "toolweave")
        args = ["serve", "--stdio", "-c", str(config_path)]
        entry = {"command": executable, "args": [*args, "--server", server] if server else args}
    backup = _backup(path)
    servers[name] = entry
    path.parent.mkdir(parents=True, exist_ok=True)
    holds_key = bool(http and key)
    write_file(path, json.dumps(document, indent=2, ensure_ascii=False) + "\n", private=holds_key)
    kept = f" (the previous file is kept as {backup})" if backup else ""
    kept += "; it holds the key, so only you can read it (0600)" if holds_key else ""
    out.print(
        f"added {escape(name)!r} to {client.title}'s {escape(str(path))}{escape(kept)}; restart {client.title} to use it",
        highlight=False,
        soft_wrap=True,
    )


def server_url(url: str, server: str) -> str:
    """A virtual server's MCP URL from the gateway's (`http://host:8080/mcp` or `http://host:8080`)."""
    base = url.rstrip("/").removesuffix("/mcp")
    return f"{base}/servers/{server}/mcp"


def _check_server(config_path: Path, server: str) -> None:
    """The client would start `serve --stdio --server NAME`: NAME must be one of the config's servers."""
    cfg = load_config_or_exit(config_path)
    known = [s.name for s in cfg.servers]
    if server not in known:
        err.print(
            f"[red]no virtual server {escape(server)!r} in {escape(str(config_path))}[/] "
            f"(its [[servers]]: {escape(', '.join(known) or 'none')})",
            highlight=False,
            soft_wrap=True,
        )
        raise typer.Exit(1)


def _backup(path: Path) -> Path | None:
    """A copy of `path` beside it, with its mode (it may hold a key too), created new: never a link."""
    if not path.is_file():
        return None
    backup = path.with_name(f"{path.name}.{time.strftime('%Y%m%d-%H%M%S')}.bak")
    data = path.read_bytes()
    mode = stat.S_IMODE(path.stat().st_mode)
    try:
        descriptor = os.open(backup, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, mode)
    except FileExistsError:
        err.print(f"[red]{escape(str(backup))} exists[/]; try again in a second")
        raise typer.Exit(1) from None
    with os.fdopen(descriptor, "wb") as handle:
        handle.write(data)
    return backup


# -- writing files -------------------------------------------------------------------------------

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


def refuse_link(path: Path) -> None:
    """Exit when `path` is a symbolic link (dangling or not), or, given relative (a project's
    `.vscode/mcp.json`), one of its folders is: toolweave writes only regular files it names."""
    folders = list(path.parents)[:-1] if not path.is_absolute() else []
    for place in (path, *folders):
        if place.is_symlink():
            err.print(
                f"[red]{escape(str(place))} is a symbolic link[/] (to {escape(os.readlink(place))}); "
                "toolweave writes only regular files: give the path of the file itself",
                soft_wrap=True,
            )
            raise typer.Exit(1)


def write_file(path: Path, text: str, *, private: bool = False) -> None:
    """Write `text` to a new file beside `path` and rename it over `path`: a link put there meanwhile is
    replaced, never followed. `private`: mode 0600 (it holds a key); otherwise the mode `path` had, or
    0644 less the umask for a new file."""
    if private:
        mode = 0o600
    elif path.is_file():
        mode = stat.S_IMODE(path.stat().st_mode)
    else:
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o666 & ~umask
    partial = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    partial.unlink(missing_ok=True)
    descriptor = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, mode)
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.chmod(partial, mode)  # os.open's mode passes through the umask; a private file must be 0600
        os.replace(partial, path)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
