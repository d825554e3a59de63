"""Taking over the runs of a gateway that died: resumed here, by themselves, exactly once.

Every gateway's heartbeat is its lease on the runs it executes (`store.runs`). When one stops
beating for `TOOLWEAVE_RUN_STALE_AFTER_SECONDS` (10 s; found within one more heartbeat, 3 s),
the first gateway to sweep moves its `running` runs to `interrupted` (one atomic UPDATE, so
exactly one gateway reports each run) and hands them here. Each is then resumed under the
rules of `executor.resume`, as its own tenant, once this gateway has started and its
backends have had their first connection attempt:

- a workflow restores its completed steps (never re-run); a step that was in flight runs again
  only when it is idempotent or retries, else the run fails saying the step was not re-run;
- a run whose arguments held a secret (never recorded) cannot be resumed without a person
  supplying it again: it stays `interrupted` and its error says what to supply;
- a fan-out, router or direct call that is not idempotent stays `interrupted`, saying why.

`claim` is atomic too, so a person resuming the same run at the same moment races safely.
Each outcome is a `run_takeover` event on `GET /api/v1/events` (the run's tenant sees it), and
the run record has the result as always (`toolweave runs show ID`, `GET /api/v1/runs/{id}`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

from toolweave.executor.errors import ResumeError
from toolweave.executor.resume import resume_run
from toolweave.executor.session import ALL_SCOPES, Session
from toolweave.gateway import Gateway
from toolweave.store import SqlRunStore

logger = logging.getLogger("toolweave.runs")

TAKEOVER = Session(tenant=None, scopes=ALL_SCOPES, label="takeover")
"""Who resumes a taken-over run: the operator (`resume_run` then acts as the run's tenant)."""
MAX_AT_ONCE = 16
"""Runs resumed concurrently by one gateway; the rest wait their turn."""


class RunTakeover:
    """Resumes the runs `SqlRunStore` reports orphaned (its `on_orphaned` callback)."""

    def __init__(
        self, gateway: Gateway, runs: SqlRunStore, publish: Callable[[dict[str, Any]], None], instance: str
    ) -> None:
        self._gateway = gateway
        self._runs = runs
        self._publish = publish
        self._instance = instance
        self._ready = asyncio.Event()
        self._slots = asyncio.Semaphore(MAX_AT_ONCE)
        self._tasks: set[asyncio.Task[None]] = set()

    def orphaned(self, run_ids: list[str]) -> None:
        """Called from the run store's sweep: resume each in the background."""
        loop = asyncio.get_running_loop()
        for run_id in run_ids:
            task = loop.create_task(self._take_over(run_id), name=f"toolweave-takeover-{run_id}")
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    def ready(self) -> None:
        """The gateway serves: taken-over runs may start (they wait for the backends' first attempt)."""
        self._ready.set()

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _take_over(self, run_id: str) -> None:
        await self._ready.wait()
        await self._gateway.wait_for_first_connections()
        async with self._slots:
            runs = self._runs
            record = await runs.get_run(run_id)
            tool, tenant = (record.tool, record.tenant) if record is not None else (None, None)
            logger.warning("taking over run %s (%s) of a gateway that stopped", run_id, tool)
            try:
                result = await resume_run(self._gateway.executor(TAKEOVER), run_id)
            except ResumeError as error:
                if error.code == "already_claimed":
                    return  # someone resumed it first: theirs to report
                await self._waits(runs, run_id, tool, tenant, error)
                return
            except Exception:
                logger.exception("taking over run %s failed; it stays interrupted", run_id)
                return
            status = "error" if result.is_error else "ok"
            logger.warning("run %s taken over and finished here: %s", run_id, status)
            self._event(run_id, tool, tenant, "resumed", status=status)

    async def _waits(
        self, runs: SqlRunStore, run_id: str, tool: str | None, tenant: str | None, error: ResumeError
    ) -> None:
        """Not resumable by itself: the run stays interrupted and says what a person must do."""
        if error.code == "missing_secret":
            reason = (
                "the gateway running it stopped; it waits for a person to resume it with its secret "
                f"argument(s) again (`toolweave runs resume {run_id} --args JSON`): {error.message}"
            )
        else:
            reason = f"the gateway running it stopped and it was not resumed by itself: {error.message}"
        logger.warning("run %s not taken over: %s", run_id, error.message)
        try:
            await runs.note_interrupted(run_id, reason)
        except Exception:
            logger.warning("could not record why run %s waits", run_id, exc_info=True)
        self._event(run_id, tool, tenant, "waiting", reason=reason)

    def _event(self, run_id: str, tool: str | None, tenant: str | None, outcome: str, **extra: Any) -> None:
        self._publish(
            {
                "type": "run_takeover",
                "run_id": run_id,
                "tool": tool,
                "tenant": tenant,
                "outcome": outcome,
                "instance": self._instance,
                "at": time.time(),
                **extra,
            }
        )
