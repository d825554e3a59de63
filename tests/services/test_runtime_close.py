"""Closing the server runtime: every background task it started has ended before the database
closes, so none is left for the event loop's own shutdown (where a database session cancelled
mid-query waited forever on a connection whose engine was gone: a hung TestClient exit)."""

from __future__ import annotations

import asyncio
from pathlib import Path

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
