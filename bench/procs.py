"""Process management for the benchmark: free loopback ports, readiness, and certain cleanup.

Every process is started in its own session (process group) and registered with a
`ProcessGroup`; leaving the group (normally, on error, or on SIGINT/SIGTERM) terminates
each registered process group by its id, then kills what is left. Nothing is ever
killed by name.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

LOOPBACK = "127.0.0.1"
BENCH_DIR = Path(__file__).resolve().parent
REPO_ROOT = BENCH_DIR.parent


class StartError(RuntimeError):
    """A process exited or never became ready; the message carries its output's tail."""


def free_port() -> int:
    """A TCP port on loopback that is free right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((LOOPBACK, 0))
        return int(sock.getsockname()[1])


def venv_bin(name: str) -> Path:
    """A console script next to the running interpreter (the project's virtualenv)."""
    return Path(sys.executable).parent / name


@dataclass
class Managed:
    """A started process and the file its stdout and stderr go to."""

    name: str
    proc: subprocess.Popen[bytes]
    log_path: Path
    url: str | None = None

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def log_tail(self, limit: int = 2000) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return text[-limit:]


def _stop_one(managed: Managed, grace: float) -> None:
    if managed.proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(managed.pid, signal.SIGTERM)
    try:
        managed.proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(managed.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            managed.proc.wait(timeout=grace)


class ProcessGroup:
    """Owns the processes a scenario starts; stops all of them on exit, whatever happens."""

    def __init__(self, log_dir: Path | None = None) -> None:
        self._procs: list[Managed] = []
        self._log_dir = log_dir or Path(tempfile.mkdtemp(prefix="toolweave-bench-"))

    @property
    def log_dir(self) -> Path:
        return self._log_dir

    def start(
        self,
        name: str,
        argv: Sequence[str],
        *,
        env: dict[str, str] | None = None,
        cwd: Path | None = None,
    ) -> Managed:
        """Start `argv` in a new process group, its output going to a log file."""
        log_path = self._log_dir / f"{name}.log"
        full_env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
        with log_path.open("wb") as log:
            proc = subprocess.Popen(
                list(argv),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=full_env,
                cwd=str(cwd or REPO_ROOT),
                start_new_session=True,
            )
        managed = Managed(name=name, proc=proc, log_path=log_path)
        self._procs.append(managed)
        return managed

    def stop(self, managed: Managed, grace: float = 3.0) -> None:
        _stop_one(managed, grace)
        if managed in self._procs:
            self._procs.remove(managed)

    def stop_all(self, grace: float = 3.0) -> None:
        for managed in reversed(self._procs):
            _stop_one(managed, grace)
        self._procs.clear()

    def __enter__(self) -> ProcessGroup:
        _LIVE_GROUPS.append(self)
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self.stop_all()
        finally:
            if self in _LIVE_GROUPS:
                _LIVE_GROUPS.remove(self)


_LIVE_GROUPS: list[ProcessGroup] = []


def _on_signal(signum: int, _frame: FrameType | None) -> None:
    for group in list(_LIVE_GROUPS):
        group.stop_all(grace=1.0)
    raise SystemExit(128 + signum)


def install_signal_handlers() -> None:
    """Turn SIGTERM (and SIGINT) into a clean stop of every process the bench started."""
    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)


def wait_port(managed: Managed, port: int, timeout: float) -> None:
    """Wait until `port` on loopback accepts a TCP connection; raise StartError otherwise."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not managed.alive():
            raise StartError(f"{managed.name} exited with {managed.proc.returncode}:\n{managed.log_tail()}")
        with contextlib.suppress(OSError), socket.create_connection((LOOPBACK, port), timeout=0.2):
            return
        time.sleep(0.05)
    raise StartError(
        f"{managed.name} did not listen on port {port} within {timeout:.0f}s:\n{managed.log_tail()}"
    )


def _spawn_backend(
    group: ProcessGroup, name: str, extra_tools: int, json_response: bool
) -> tuple[Managed, int]:
    port = free_port()
    argv = [sys.executable, str(BENCH_DIR / "backend_server.py"), "--port", str(port), "--name", name]
    if extra_tools:
        argv += ["--extra-tools", str(extra_tools)]
    if json_response:
        argv.append("--json-response")
    managed = group.start(name, argv)
    managed.url = f"http://{LOOPBACK}:{port}/mcp"
    return managed, port


def start_backends(
    group: ProcessGroup, names: Sequence[str], *, extra_tools: int = 0, timeout: float = 30.0
) -> list[Managed]:
    """Start several bench backends at once (streamable HTTP, free ports); wait until all listen."""
    spawned = [_spawn_backend(group, name, extra_tools, False) for name in names]
    for managed, port in spawned:
        wait_port(managed, port, timeout)
    return [managed for managed, _ in spawned]


def start_backend(
    group: ProcessGroup,
    name: str,
    *,
    extra_tools: int = 0,
    json_response: bool = False,
    timeout: float = 30.0,
) -> Managed:
    """Start the bench backend over streamable HTTP on a free port and wait until it listens."""
    managed, port = _spawn_backend(group, name, extra_tools, json_response)
    wait_port(managed, port, timeout)
    return managed


def stdio_backend_argv(lite: bool = False) -> list[str]:
    """The command line of a stdio bench backend: the SDK server, or the stdlib-only one."""
    if lite:
        return [sys.executable, str(BENCH_DIR / "stdio_lite.py")]
    return [sys.executable, str(BENCH_DIR / "backend_server.py"), "--stdio"]


def rss_mb(pid: int) -> float | None:
    """Resident set size of one process in MiB (from /proc), None when it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    except OSError:
        return None
    return None
