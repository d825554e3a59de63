"""Logging setup: plain text for people, JSON lines for log shippers.

Nothing in toolweave logs argument values or connection secrets: they are
never put in a log record. What a record does carry is redacted by field: a
JSON line's `extra=` field whose name says it is a secret (`token`,
`headers.Authorization`, see `secrets.is_secret_name`) has its value replaced,
whatever it is. No list of secret values is consulted, so what a tenant stores
never changes another caller's log lines, and a line costs the same however
many secrets the server holds.
"""

from __future__ import annotations

import logging
import sys
import time
from typing import Any, TextIO

import orjson

from toolweave.secrets import REDACTED, is_secret_name, redact_named

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
_STANDARD_ATTRS = frozenset(
    vars(logging.LogRecord("", 0, "", 0, "", (), None)).keys() | {"message", "asctime", "taskName"}
)


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
                entry[key] = REDACTED if is_secret_name(key) else redact_named(value)
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return orjson.dumps(entry, default=str).decode()


QUIET_AT_INFO = (
    "alembic",  # narrates every plugin it loads
    "httpx",  # one line per request the gateway makes to an HTTP backend, the SDK's version probe (a
    "httpx2",  # 400 by design) looking like an error among them
    "mcp.server.streamable_http_manager",  # "session manager started", once per transport lane
)
"""Loggers that say at INFO what only matters when debugging; shown again with log_level = "debug"."""


def configure_logging(level: str = "info", *, json_lines: bool = False, stream: TextIO | None = None) -> None:
    """Replace the root handlers: the CLI calls this once per process."""
    handler = logging.StreamHandler(stream or sys.stderr)
    if json_lines:
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter(TEXT_FORMAT))
    root = logging.getLogger()
    for existing in list(root.handlers):
        root.removeHandler(existing)
    root.addHandler(handler)
    root.setLevel(getattr(logging, level.upper(), logging.INFO))
    quiet = logging.NOTSET if level.lower() == "debug" else logging.WARNING
    for chatty in QUIET_AT_INFO:
        logging.getLogger(chatty).setLevel(quiet)
