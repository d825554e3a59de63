"""Finding 10: two gateways on one SQLite file without a change feed — the second refuses to start.

As found: both started without a word; a composite deleted through one stayed served by the other
until a restart, and the other answered nonsense for one created meanwhile. Now the first holds
`<file>.lock`; a second (in-process or `toolweave serve`) stops with a message naming the holder and
the setting that lets gateways share a file; once the first stops, the file is free again.
"""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path

import pytest

from support.api import AppFactory
from support.configs import python_backend, toml_document
from support.paths import TOOLWEAVE
from toolweave.store.errors import GatewayLockError


async def test_a_second_gateway_on_the_same_sqlite_file_refuses_to_start(sqlite_app: AppFactory) -> None:
    first = await sqlite_app({"backends": [python_backend()]})
    with pytest.raises(GatewayLockError) as refused:
        await sqlite_app({"backends": [python_backend()]})
    message = str(refused.value)
    assert "another toolweave gateway" in message and "gateway.redis_url" in message
    assert "toolweave.db" in message
    await sqlite_app.close(first)
    again = await sqlite_app({"backends": [python_backend()]})
    assert again.runtime.started


async def test_toolweave_serve_says_why_it_cannot_start(sqlite_app: AppFactory, tmp_path: Path) -> None:
    await sqlite_app({"backends": [python_backend()]})
    config = tmp_path / "second.toml"
    config.write_text(
        toml_document(
            {"gateway": {"database": sqlite_app.url, "port": 21150}, "backends": [python_backend()]}
        )
    )
    served = await asyncio.to_thread(
        subprocess.run,
        [str(TOOLWEAVE), "serve", "-c", str(config)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert served.returncode == 1, (served.stdout, served.stderr)
    assert "cannot start" in served.stderr and "another toolweave gateway" in served.stderr, served.stderr
    assert "Traceback" not in served.stderr
