"""Logging setup: plain text for people, JSON lines for log shippers, secrets scrubbed in both.

Nothing in toolweave logs argument values or connection secrets on purpose.
The scrubber is the second line of defence: every connection secret the
server loads or stores is registered, and any log line that would contain
one (an exception text from a library, a debug print) gets the redaction marker
instead. Scrubbing costs nothing until a line is actually written.
"""

from __future__ import annotations

import logging
import sys
import time
from typing import Any, TextIO

import orjson

from toolweave.secrets import SCRUBBER

_STANDARD_ATTRS = frozenset(
    vars(logging.LogRecord("", 0, "", 0, "", (), None)).keys() | {"message", "asctime", "taskName"}
)


class ScrubbingFormatter(logging.Formatter):
    """The usual text format, with registered secrets replaced."""

    def format(self, record: logging.LogRecord) -> str:
        return SCRUBBER.scrub(super().format(record))


class JsonFormatter(logging.Formatter):
    """One JSON object per line: `ts`, `level`, `logger`, `message`, any `extra=` fields, `exc`."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in _STANDARD_ATTRS and not key.startswith("_"):
                entry[key] = value
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        line = orjson.dumps(entry, default=str).decode()
        return SCRUBBER.scrub(line)


def configure_logging(level: str = "info", *, json_lines: bool = False, stream: TextIO | None = None) -> None:
    """Replace the root handlers: the CLI calls this once per process."""
    handler = logging.StreamHandler(stream or sys.stderr)
    if json_lines:
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(ScrubbingFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    for existing in list(root.handlers):
        root.removeHandler(existing)
    root.addHandler(handler)
    root.setLevel(getattr(logging, level.upper(), logging.INFO))
    if level.lower() != "debug":  # migrations narrate every plugin they load at info
        logging.getLogger("alembic").setLevel(logging.WARNING)
