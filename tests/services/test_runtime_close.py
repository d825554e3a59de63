"""Closing the server runtime: every background task it started has ended before the database
closes, so none is left for the event loop's own shutdown (where a database session cancelled
mid-query waited forever on a connection whose engine was gone: a hung TestClient exit)."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

from support.api import AppFactory
from support.configs import config, python_backend
from toolweave.services.runtime import ServerRuntime


async def test_the_audit_pruner_ends_before_the_database_closes(tmp_path: Path) -> None:
    cfg = config(python_backend(), gateway={"database": f"sqlite:///{tmp_path / 'gw.db'}"})
    runtime = ServerRuntime(cfg)
    order: list[str] = []
    pruning = asyncio.Event()

    async def prune_slowly(cutoff: object) -> int:
        """A prune still in its query when the gateway stops; cancelling it takes a moment (a
        database session rolls back and closes its connection)."""
        pruning.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            await asyncio.sleep(0.2)
            order.append("pruner ended")
            raise
        return 0

    runtime.audit.prune = prune_slowly  # type: ignore[method-assign]
    close_database = runtime.db.close

    async def close_and_note() -> None:
        order.append("database closed")
        await close_database()

    runtime.db.close = close_and_note  # type: ignore[method-assign]
    await runtime.start()
    await pruning.wait()
    await runtime.close()
    assert order == ["pruner ended", "database closed"]


async def test_a_try_it_call_still_running_is_cancelled_by_the_stop(sqlite_app: AppFactory) -> None:
    """A page's live call (Try it) runs in a task of its own: the gateway's stop ends it too."""
    api = await sqlite_app({"backends": [python_backend()]})
    async with api.client() as client:
        page = await client.get("/admin")
        token = CSRF.search(page.text)
        assert token, page.text[:500]
        started = await client.post(
            "/tools/py__nap/try",
            data={"csrf": token.group(1), "seconds": "30"},
            headers={"hx-request": "true"},
        )
    assert re.search(r"/calls/[A-Za-z0-9_-]+", started.text), started.text[:2000]
    assert _live_call_tasks(), "the call is running"
    await sqlite_app.close(api)
    assert _live_call_tasks() == []


CSRF = re.compile(r'name="csrf" value="([^"]+)"')


def _live_call_tasks() -> list[asyncio.Task[object]]:
    return [
        task
        for task in asyncio.all_tasks()
        if not task.done() and getattr(task.get_coro(), "__qualname__", "") == "LiveCalls._run"
    ]
