"""The test REST API (tests/servers/apiserver.py) on a free loopback port, shared by the module's tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from support.processes import api_testserver


@pytest.fixture(scope="session")
def api_url() -> Iterator[str]:
    with api_testserver() as url:
        yield url
