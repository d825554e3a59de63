"""What `configure_logging` shows at info: toolweave's own lines, not the libraries' per-request chatter."""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator

import pytest

from toolweave.services.logs import QUIET_AT_INFO, configure_logging


@pytest.fixture
def restore_logging() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    levels = {name: logging.getLogger(name).level for name in QUIET_AT_INFO}
    yield
    root.handlers[:] = handlers
    root.setLevel(level)
    for name, saved in levels.items():
        logging.getLogger(name).setLevel(saved)


def test_request_lines_and_sdk_chatter_are_hidden_at_info_and_shown_at_debug(restore_logging: None) -> None:
    stream = io.StringIO()
    configure_logging("info", stream=stream)
    logging.getLogger("httpx2").info('HTTP Request: POST http://127.0.0.1:9/mcp "HTTP/1.1 400 Bad Request"')
    logging.getLogger("mcp.server.streamable_http_manager").info("StreamableHTTP session manager started")
    logging.getLogger("toolweave.backends").info("backend docs connected (3 tools)")
    logging.getLogger("httpx2").warning("a warning still shows")
    shown = stream.getvalue()
    assert "Bad Request" not in shown and "session manager" not in shown
    assert "backend docs connected" in shown and "a warning still shows" in shown

    stream = io.StringIO()
    configure_logging("debug", stream=stream)
    logging.getLogger("httpx2").info("HTTP Request: GET http://127.0.0.1:9/")
    assert "HTTP Request" in stream.getvalue()
