"""`toolweave serve --workers N`: N gateway processes on one port, the kernel spreading connections.

Each worker is a whole gateway (its own runtime, backends, instance id), forked from `serve` once the
config is loaded and the port is known. Worker 0 accepts on the socket `serve` bound; every other
worker listens on its own socket bound to the same address with SO_REUSEPORT, so the kernel balances
new connections across them (a shared accept queue woke whichever worker was idle first and left the
others starved under keep-alive load). What a client meets on any worker is shared exactly as between
replicas on several machines: MCP sessions, UI logins, events and definitions over Redis and the
database (so `--workers` needs `gateway.redis_url`).

`serve` itself serves nothing: it supervises. A worker that dies (a crash, the OOM killer, `kill -9`)
is forked again in its place; `serve` keeps worker 0's socket open meanwhile, so connections arriving
for it wait in its queue instead of being refused. Workers that keep dying at start (an unreachable
database) are not restarted for ever: after `QUICK_DEATHS` deaths in a row within `QUICK_SECONDS` of
their start, `serve` stops with status 1. When `serve` stops it stops the workers (SIGTERM, then
SIGKILL after `STOP_SECONDS`); a worker whose parent dies gets SIGTERM from the kernel
(PR_SET_PDEATHSIG). Forking only from the supervisor, which never starts an event loop or a thread,
keeps every worker (a restarted one too) a clean copy of a process that has only read its config.
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
from types import FrameType

STOP_SECONDS = 10.0
"""How long stopping workers may take to finish their requests before they are killed."""
RESTART_DELAY = 1.0
"""Pause before re-forking a worker that died soon after its start: a crash loop costs one fork a second."""
QUICK_SECONDS = 10.0
"""A worker that dies sooner than this after its start died 'quickly' (it may never have served)."""
QUICK_DEATHS = 3
"""This many quick deaths in a row and `serve` gives up (the workers cannot start)."""
_PR_SET_PDEATHSIG = 1

Serve = Callable[[socket.socket, int, bool], None]
"""How a worker serves: `serve(its socket, its index, first start)` (index 0, first start: the one
that tells the operator what happens)."""


class _Stop(Exception):
    """SIGTERM or SIGINT reached the supervisor."""


def supervise(
    count: int, listener: socket.socket, serve: Serve, say: Callable[[str], None] | None = None
) -> int:
    """Run `count` workers on `listener`'s address until SIGTERM/SIGINT, re-forking any that dies.
    Returns the exit status: 0 when stopped by a signal, 1 when the workers keep dying at start."""
    tell = say or (lambda line: print(line, file=sys.stderr, flush=True))
    running: dict[int, tuple[int, float]] = {}  # pid -> (index, when it started)
    previous = {number: signal.getsignal(number) for number in (signal.SIGTERM, signal.SIGINT)}
    for number in previous:
        signal.signal(number, _raise_stop)
    try:
        for index in range(count):
            running[_fork(listener, index, True, serve)] = (index, time.monotonic())
        quick = 0
        while True:
            pid, status = os.waitpid(-1, 0)
            if pid not in running:
                continue
            index, started = running.pop(pid)
            lived = time.monotonic() - started
            quick = quick + 1 if lived < QUICK_SECONDS else 0
            if quick >= QUICK_DEATHS:
                tell(f"toolweave: workers keep dying at start ({quick} in a row); stopping")
                return 1
            tell(f"toolweave worker {pid} {_how_it_ended(status)} after {lived:.0f} s; starting another")
            if quick:
                time.sleep(RESTART_DELAY)
            running[_fork(listener, index, False, serve)] = (index, time.monotonic())
    except _Stop:
        return 0
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
        stop_workers(list(running))


def _raise_stop(_number: int, _frame: FrameType | None) -> None:
    raise _Stop


def _how_it_ended(status: int) -> str:
    if os.WIFSIGNALED(status):
        return f"was killed by {signal.Signals(os.WTERMSIG(status)).name}"
    return f"exited with status {os.waitstatus_to_exitcode(status)}"


def _fork(listener: socket.socket, index: int, first: bool, serve: Serve) -> int:
    pid = os.fork()
    if pid == 0:  # the worker: never returns
        _run_worker(listener, index, first, serve)
    return pid


def _run_worker(listener: socket.socket, index: int, first: bool, serve: Serve) -> None:
    code = 0
    try:
        for number in (signal.SIGTERM, signal.SIGINT):  # not the supervisor's: uvicorn installs its own
            signal.signal(number, signal.SIG_DFL if number == signal.SIGTERM else signal.default_int_handler)
        _die_with_parent()
        _own_session()
        serve(listener if index == 0 else _own_socket(listener), index, first)
    except BaseException as error:  # noqa: BLE001 - a worker reports and exits; the supervisor goes on
        if not isinstance(error, KeyboardInterrupt | SystemExit):
            print(f"toolweave worker {os.getpid()} stopped: {error}", file=sys.stderr)
            code = 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _own_socket(listener: socket.socket) -> socket.socket:
    """A socket of this worker's own on `listener`'s address (SO_REUSEPORT: the kernel balances)."""
    host, port = listener.getsockname()[:2]
    family = listener.family
    listener.close()
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind((host, port))
    sock.listen(2048)
    return sock


def _own_session() -> None:
    """Each worker leads its own session, so the scheduler weighs it as it weighs a separate
    `serve`: Linux's autogroups share the CPU between sessions first, and workers left in
    `serve`'s session split one session's share between them on a busy machine (bench.replicas:
    `--workers 2` served 0.65-0.83x one process while two replicas, each in its own session,
    served 1.2-1.5x). Ctrl-C still stops them: `serve` gets it and stops its workers."""
    with contextlib.suppress(OSError):
        os.setsid()


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
