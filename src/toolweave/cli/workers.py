"""`toolweave serve --workers N`: N gateway processes on one port, the kernel spreading connections.

Each worker is a whole gateway (its own runtime, backends, instance id), forked from `serve` once the
config is loaded and the port is known, and listening on its own socket bound to the same address
with SO_REUSEPORT, so the kernel balances new connections across them (a shared accept queue woke
whichever worker was idle first and left the others starved under keep-alive load). What a client
meets on any worker is shared exactly as between replicas on several machines: MCP sessions, UI
logins, events and definitions over Redis and the database (so `--workers` needs `gateway.redis_url`).

`serve` is worker 0 and the parent: when it stops it stops the others (SIGTERM, then SIGKILL after
`STOP_SECONDS`); a worker whose parent dies gets SIGTERM from the kernel (PR_SET_PDEATHSIG).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import socket
import sys
import time
from collections.abc import Callable

STOP_SECONDS = 10.0
"""How long stopping workers may take to finish their requests before they are killed."""
_PR_SET_PDEATHSIG = 1


def start_workers(count: int, listener: socket.socket, serve: Callable[[socket.socket], None]) -> list[int]:
    """Fork `count` workers, each serving (`serve(its socket)`) on `listener`'s address; their pids."""
    host, port = listener.getsockname()[:2]
    family = listener.family
    children = []
    for _ in range(count):
        pid = os.fork()
        if pid == 0:  # the worker: never returns
            _run_worker(listener, family, host, port, serve)
        children.append(pid)
    return children


def _run_worker(
    inherited: socket.socket, family: int, host: str, port: int, serve: Callable[[socket.socket], None]
) -> None:
    code = 0
    try:
        _die_with_parent()
        inherited.close()
        sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind((host, port))
        sock.listen(2048)
        serve(sock)
    except BaseException as error:  # noqa: BLE001 - a worker reports and exits; the parent goes on
        if not isinstance(error, KeyboardInterrupt | SystemExit):
            print(f"toolweave worker {os.getpid()} stopped: {error}", file=sys.stderr)
            code = 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _die_with_parent() -> None:
    """Linux: the kernel sends this worker SIGTERM when `serve` (its parent) dies, even by SIGKILL."""
    with contextlib.suppress(Exception):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def stop_workers(children: list[int]) -> None:
    """SIGTERM every worker, wait for them (at most `STOP_SECONDS`), SIGKILL the ones still there."""
    for pid in children:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_SECONDS
    waiting = set(children)
    while waiting and time.monotonic() < deadline:
        for pid in list(waiting):
            with contextlib.suppress(ChildProcessError):
                done, _status = os.waitpid(pid, os.WNOHANG)
                if done == 0:
                    continue
            waiting.discard(pid)
        time.sleep(0.05)
    for pid in waiting:
        with contextlib.suppress(ProcessLookupError, ChildProcessError):
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
