"""One serving gateway per SQLite file, unless they share a change feed: an advisory lock file.

Why: two gateways on one SQLite file without a change feed (Redis, or polling) each keep
their own catalog; a composite deleted through one stayed served by the other until a
restart, and the other answered nonsense for one created meanwhile. So a gateway that
serves a SQLite file with no feed holds `<file>.lock` (an exclusive `flock`, released by
the kernel when the process ends, even on a crash); a second such gateway refuses to
start, naming the process that holds it and the settings that make sharing work.
One-shot CLI commands on the same file do not take the lock.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from toolweave.store.errors import GatewayLockError

try:
    import fcntl
except ImportError:  # Windows: no flock; the check is skipped there
    fcntl = None  # type: ignore[assignment]


class GatewayLock:
    """The held lock on `<database>.lock`; `release()` (or the process ending) gives it up."""

    def __init__(self, database: Path) -> None:
        self.path = database.with_name(database.name + ".lock")
        self._fd: int | None = None

    def acquire(self) -> None:
        if fcntl is None or self._fd is not None:
            return
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_holder(fd)
            os.close(fd)
            raise GatewayLockError(
                f"another toolweave gateway{holder} is serving {self.path.with_suffix('')} "
                f"(it holds {self.path}). Two gateways on one SQLite file would serve different "
                "composites: stop the other one, or let both keep in step through a change feed "
                "(set gateway.redis_url)."
            ) from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._fd = fd

    def release(self) -> None:
        if self._fd is None:
            return
        with contextlib.suppress(OSError):
            os.ftruncate(self._fd, 0)
        os.close(self._fd)  # closing drops the flock
        self._fd = None


def _read_holder(fd: int) -> str:
    with contextlib.suppress(OSError, ValueError):
        pid = int(os.pread(fd, 32, 0).decode().strip())
        return f" (pid {pid})"
    return ""
