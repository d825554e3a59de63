"""A stdio backend's stderr as log records: one per line, structured, sanitized, bounded.

A child process's stderr used to be the gateway's own stderr file descriptor: its
bytes went out raw, between the gateway's log lines, so one backend printing
`{"level":` or an ANSI escape broke `--log-json` for the whole process, and a
token the child printed was written as it was. Instead the child writes into a
pipe the gateway reads; every line becomes a record of the logger
`toolweave.stderr.<backend>` (field `backend`), so it goes through the same
handler and formatter as every other line.

Each line is decoded (invalid UTF-8 replaced), its control characters escaped,
cut at `MAX_LINE_CHARS`, and the values of the backend's own secret-named
settings (an `env` key or header whose name says token, key, password...: see
`secrets.is_secret_name`) replaced by the redaction marker. At most
`BURST_LINES` lines, refilled at `LINES_PER_SECOND`, are logged; the rest are
counted and reported in one line, so a chatty child cannot flood the log.

The last `TAIL_LINES` lines are kept (logged or not): when the child's connection
fails, they go into the backend's error (`tail`), because the cause ("invalid peer
certificate") is what the child said, and "Connection closed" tells an agent nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections import deque
from typing import IO, Any

from toolweave.secrets import is_secret_name, redact_text

MAX_LINE_CHARS = 2_000
"""A longer line is cut here (the rest, up to its newline, is dropped)."""
LINES_PER_SECOND = 50.0
BURST_LINES = 200
READ_CHUNK = 65_536
MIN_SECRET_CHARS = 4
"""Shorter secret values are not replaced (they would hit ordinary words)."""
TAIL_LINES = 5
"""How many of the child's last lines a connection error quotes."""
TAIL_LINE_CHARS = 300
"""Each quoted line is cut here: an error message stays short."""


def backend_secrets(config: Any) -> tuple[str, ...]:
    """The values of a backend's secret-named `env` keys and headers, longest first."""
    values = {
        value
        for mapping in (config.env or {}, config.headers or {})
        for key, value in mapping.items()
        if is_secret_name(key) and isinstance(value, str) and len(value) >= MIN_SECRET_CHARS
    }
    return tuple(sorted(values, key=len, reverse=True))


def clean_line(raw: bytes, secrets: tuple[str, ...]) -> str:
    """One stderr line as safe log text: decoded, control characters escaped, cut, secrets redacted."""
    text = raw.decode("utf-8", errors="replace").rstrip("\r\n")
    if len(text) > MAX_LINE_CHARS:
        text = text[:MAX_LINE_CHARS] + " [cut]"
    if not text.isprintable():
        text = "".join(ch if ch.isprintable() else ch.encode("unicode_escape").decode("ascii") for ch in text)
    return redact_text(text, secrets)


class StderrRelay:
    """The pipe one child process writes its stderr to, and the task that logs what it writes."""

    def __init__(self, backend: str, secrets: tuple[str, ...]) -> None:
        self.backend = backend
        self.secrets = secrets
        self.logger = logging.getLogger(f"toolweave.stderr.{backend}")
        read_fd, write_fd = os.pipe()
        self._reader: IO[bytes] = os.fdopen(read_fd, "rb", buffering=0)
        self.child_end: IO[str] = os.fdopen(write_fd, "w")
        """Handed to the child as its stderr; closed here once the child has it."""
        self._task: asyncio.Task[None] | None = None
        self._tokens = float(BURST_LINES)
        self._refilled = time.monotonic()
        self._dropped = 0
        self._tail: deque[bytes] = deque(maxlen=TAIL_LINES)

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._pump(), name=f"stderr:{self.backend}")

    def child_started(self) -> None:
        """The child holds its copy of the write end: drop ours, so its exit reads as end of file."""
        with contextlib.suppress(OSError):
            self.child_end.close()

    async def close(self) -> None:
        self.child_started()
        if self._task is not None and not self._task.done():
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task

    async def tail(self, wait: float) -> list[str]:
        """The child's last lines, cleaned and cut; first waiting (at most `wait` seconds) until its
        stderr has ended, so that what it said just before it exited is there too."""
        task = self._task
        if task is not None and not task.done():
            with contextlib.suppress(TimeoutError, asyncio.CancelledError, Exception):
                await asyncio.wait_for(asyncio.shield(task), wait)
        lines = [clean_line(raw, self.secrets) for raw in self._tail]
        return [line if len(line) <= TAIL_LINE_CHARS else line[:TAIL_LINE_CHARS] + " [cut]" for line in lines]

    async def _pump(self) -> None:
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader(limit=READ_CHUNK)
        transport, _ = await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader), self._reader
        )
        pending = b""
        cut = False
        try:
            while chunk := await reader.read(READ_CHUNK):
                lines = (pending + chunk).split(b"\n")
                pending = lines.pop()
                for line in lines:
                    if not cut:
                        self._log(line)
                    cut = False
                if len(pending) > MAX_LINE_CHARS * 4:  # a line without end: log its start, drop the rest
                    if not cut:
                        self._log(pending)
                    pending, cut = b"", True
            if pending and not cut:
                self._log(pending)
        finally:
            transport.close()
            self._report_dropped()

    def _log(self, raw: bytes) -> None:
        if not raw.strip():
            return
        self._tail.append(raw[: MAX_LINE_CHARS + 1])
        if not self._take_token():
            self._dropped += 1
            return
        self._report_dropped()
        self.logger.info(clean_line(raw, self.secrets), extra={"backend": self.backend})

    def _take_token(self) -> bool:
        now = time.monotonic()
        self._tokens = min(BURST_LINES, self._tokens + (now - self._refilled) * LINES_PER_SECOND)
        self._refilled = now
        if self._tokens < 1:
            return False
        self._tokens -= 1
        return True

    def _report_dropped(self) -> None:
        if self._dropped:
            dropped, self._dropped = self._dropped, 0
            self.logger.warning(
                "%d stderr line(s) of backend %s dropped (more than %d a second)",
                dropped,
                self.backend,
                int(LINES_PER_SECOND),
                extra={"backend": self.backend},
            )
