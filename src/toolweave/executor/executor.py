"""`ToolExecutor`: the only door to a tool. Every call — from an MCP client, the REST API, the
CLI, the Python API, or a composite's inner step — comes through here, and every failure comes
back as an `isError` result.

A call passes the stages in order, each a module of this package: policy (scope and patterns)
→ validation → approval → admission (the session's pool, the tool's cap) → recording → the
backend, or the composite's run (whose inner calls come back through a forked executor).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Mapping, Sequence
from typing import Any

import mcp_types as types

from toolweave.catalog.catalog import Catalog, Entry
from toolweave.catalog.search import FIND_TOOLS
from toolweave.common_types import ProgressFn
from toolweave.composite.base import RunContext
from toolweave.executor import approval, batch, recording, search_mode, trace
from toolweave.executor.admission import Pools, admitted
from toolweave.executor.errors import InvalidArguments
from toolweave.executor.registry import Registry
from toolweave.executor.session import BatchCall, Session
from toolweave.executor.validation import validated
from toolweave.results import error_result
from toolweave.runs import RunRecord
from toolweave.secrets import TAINTED, follow_secrets
from toolweave.suggest import closest

logger = logging.getLogger("toolweave.executor")


class ToolExecutor:
    """Dispatches calls against the registry's current catalog for one session."""

    __slots__ = ("depth", "pools", "registry", "run", "session")

    def __init__(
        self,
        registry: Registry,
        session: Session | None = None,
        *,
        pools: Pools | None = None,
        depth: int = 0,
        run: RunRecord | None = None,
    ) -> None:
        self.registry = registry
        self.session = session or Session()
        self.pools = pools if pools is not None else registry.admission.pools_for(self.session)
        """The session's pools (shared by every executor of the same session), or a forked level's."""
        self.depth = depth
        self.run = run
        """The run record of the composite whose inner calls this executor makes (their trace events go there)."""

    # -- single calls ----------------------------------------------------------

    async def call(
        self, name: str, arguments: Any = None, *, progress: ProgressFn | None = None
    ) -> types.CallToolResult:
        """Call an exposed tool as a client would (hidden tools, and other tenants' tools, are unknown)."""
        in_flight = self.registry.in_flight
        task = asyncio.current_task()
        if self.depth or task is None or task in in_flight:  # part of a call already counted
            return await self._call(name, arguments, progress)
        call_rates = self.registry.call_rates
        if call_rates is not None:
            refused = await call_rates.charge(self.session)
            if refused is not None:
                return refused.result()
        in_flight.enter(task, name)
        try:
            return await self._call(name, arguments, progress)
        except asyncio.CancelledError:
            stopped = in_flight.stopped_result(task)  # the gateway is stopping: answered, not dropped
            if stopped is None:
                raise
            return stopped
        finally:
            in_flight.leave(task)

    async def _call(self, name: str, arguments: Any, progress: ProgressFn | None) -> types.CallToolResult:
        if arguments is None:
            arguments = {}
        catalog = self.registry.catalog
        entry = catalog.entries.get(name)
        if (
            entry is None
            and (not catalog.is_search_tool(name) or name == FIND_TOOLS)
            and await self._waited_for_startup()
        ):
            catalog = self.registry.catalog  # rebuilt with the backends that came up meanwhile
            entry = catalog.entries.get(name)
        if entry is None or not entry.listed_to(self.session.tenant):
            if entry is None and catalog.is_search_tool(name):
                return await search_mode.answer(
                    catalog,
                    self.session.tenant,
                    name,
                    arguments,
                    self.call,
                    progress,
                    self.registry.semantic,
                    self._found,
                )
            return self._unknown(name, catalog)
        return await self._dispatch(entry, arguments, progress)

    def _found(self, names: Sequence[str]) -> bool:
        """Tell the hosts the tools `find_tools` returned to this session; True when they are now listed to it."""
        listed = False
        for listener in self.registry.found_listeners:
            listed = listener(self.session, names) or listed
        return listed

    async def call_inner(
        self, reference: str, arguments: Any, progress: ProgressFn | None = None
    ) -> types.CallToolResult:
        """An inner call of a composite: references may be `backend/tool`, hidden tools are callable."""
        catalog = self.registry.catalog
        entry = catalog.lookup(reference)
        if entry is None or not entry.visible_to(self.session.tenant):
            return self._unknown(reference, catalog)
        return await self._dispatch(entry, arguments if arguments is not None else {}, progress)

    def classify(self, name: str, arguments: Any = None) -> str:
        """The admission class of a call by exposed name ('short' for unknown or denied).

        In search mode `find_tools` is a read and `call_tool` takes the class of the tool it calls.
        """
        catalog = self.registry.catalog
        entry = catalog.entries.get(name)
        if entry is None and catalog.is_search_tool(name):
            target = search_mode.target_of(name, arguments)
            if target is None:
                return "read" if name == FIND_TOOLS else "short"
            return self.classify(target)
        if entry is None or not entry.listed_to(self.session.tenant):
            return "short"
        if self.registry.policy.call_denial(entry.name, self.session) is not None:
            return "short"
        return entry.tool_class

    async def execute_batch(
        self, calls: Sequence[BatchCall | Mapping[str, Any]], *, cancel: asyncio.Event | None = None
    ) -> list[types.CallToolResult]:
        """Run a model's batch of calls: contiguous same-class runs concurrently, a barrier
        between runs, results in input order — one result per call, always."""
        return await batch.execute_batch(calls, self.call, self.classify, cancel)

    def fork(self, run: RunRecord | None = None) -> ToolExecutor:
        """The executor for a composite's inner calls: same session, pools of the next level; `run`: the
        composite's run record, which gets a trace event for each inner call."""
        return ToolExecutor(
            self.registry, self.session, pools=self.pools.fork(), depth=self.depth + 1, run=run
        )

    # -- the stages --------------------------------------------------------------

    async def _dispatch(
        self, entry: Entry, arguments: Any, progress: ProgressFn | None
    ) -> types.CallToolResult:
        """The values of the call's secret arguments, and what templates compute from them, are
        followed for the rest of the call (`secrets.TAINTED`): whatever it records is scrubbed."""
        following = follow_secrets(entry.secrets, arguments) if isinstance(arguments, Mapping) else None
        try:
            return await self._observed(entry, arguments, progress)
        finally:
            if following is not None:
                TAINTED.reset(following)

    async def _observed(
        self, entry: Entry, arguments: Any, progress: ProgressFn | None
    ) -> types.CallToolResult:
        registry = self.registry
        observe = registry.observe
        run = self.run
        tracer = registry.tracer
        if observe is None and run is None and tracer is None:
            return await self._checked(entry, arguments, progress)
        with tracer.call(entry, self.session, self.depth) if tracer is not None else _UNTRACED as span:
            started = time.perf_counter()
            result = await self._checked(entry, arguments, progress)
            seconds = time.perf_counter() - started
            tenant, subject = self.session.tenant, self.session.caller
            if run is not None:
                run.events.append(trace.tool_result_event(entry, result, seconds, tenant, run.id, subject))
            if observe is not None:
                observe(entry, result, seconds, tenant, subject)
            if span is not None:
                span.finish(result)
            return result

    async def _checked(
        self, entry: Entry, arguments: Any, progress: ProgressFn | None
    ) -> types.CallToolResult:
        registry = self.registry
        policy = registry.policy
        denial = policy.call_denial(entry.name, self.session)
        if denial is not None:
            return error_result(denial)
        try:
            arguments = validated(entry, arguments)
        except InvalidArguments as refused:
            return error_result(str(refused))
        tracer = registry.tracer
        if approval.needs_approval(policy, entry):
            asked_at = time.time_ns()
            refusal = await approval.refusal(entry, arguments, self.session)
            if tracer is not None:
                tracer.waited("approval", entry, asked_at)
            if refusal is not None:
                return error_result(refusal)
        pool = self.pools.for_class(entry.tool_class)
        cap = registry.admission.cap_for(entry)
        # queued: its pool (or its tool's cap) had no free slot, so the call waits for one
        queued = tracer is not None and (pool.locked() or (cap is not None and cap.locked()))
        queued_at = time.time_ns() if queued else 0
        try:
            if cap is None:
                async with pool:
                    admitted()
                    if queued and tracer is not None:
                        tracer.waited("admission", entry, queued_at)
                    return await self._run(entry, arguments, progress)
            async with cap, pool:
                admitted()
                if queued and tracer is not None:
                    tracer.waited("admission", entry, queued_at)
                return await self._run(entry, arguments, progress)
        except asyncio.CancelledError:
            raise
        except Exception as error:
            logger.exception("call to %s failed", entry.name)
            return error_result(
                f"calling {entry.name!r} failed inside the gateway: {type(error).__name__}: {error}"
            )

    async def _run(
        self, entry: Entry, arguments: dict[str, Any], progress: ProgressFn | None
    ) -> types.CallToolResult:
        if entry.composite is None and not self.registry.limits.record_direct_calls:
            return await self._call_backend(entry, arguments, progress)
        runs = self.registry.runs
        record, resume = recording.open_record(entry, arguments, self.session.tenant, self.session.caller)
        if self.registry.tracer is not None:
            self.registry.tracer.run(record)
        since = time.perf_counter()
        await recording.started(runs, record)
        if self.depth == 0:
            self.registry.in_flight.note_run(record.id)
        try:
            if entry.composite is None:
                result = await self._call_backend(entry, arguments, progress)
                seconds = time.perf_counter() - since
                record.events.append(
                    trace.tool_result_event(entry, result, seconds, record.tenant, record.id, record.subject)
                )
            else:
                result = await self._run_composite(entry, arguments, progress, record, resume)
        except asyncio.CancelledError:
            if not self.registry.in_flight.stopping:  # stopped by a stopping gateway: left running, so
                await recording.cancelled(runs, record, since)  # closing the run store interrupts it
            raise
        return await recording.finished(runs, record, entry, result, since)

    async def _call_backend(
        self, entry: Entry, arguments: dict[str, Any], progress: ProgressFn | None
    ) -> types.CallToolResult:
        """The backend call itself; a tenant's own credentials (connections) are picked here, at call time."""
        backend = entry.backend
        assert backend is not None and entry.backend_tool is not None
        resolve = self.registry.resolve_backend
        if resolve is not None:
            backend = await resolve(backend, self.session)
        tracer = self.registry.tracer
        if tracer is None:
            return await backend.call_tool(
                entry.backend_tool, arguments, timeout=entry.timeout, progress=progress
            )
        with tracer.backend(entry):
            return await backend.call_tool(
                entry.backend_tool, arguments, timeout=entry.timeout, progress=progress
            )

    async def _run_composite(
        self,
        entry: Entry,
        arguments: dict[str, Any],
        progress: ProgressFn | None,
        record: RunRecord,
        resume: Any,
    ) -> types.CallToolResult:
        assert entry.composite is not None
        max_depth = self.registry.limits.max_depth
        if self.depth >= max_depth:
            return error_result(
                f"composite {entry.name!r} nests deeper than gateway.max_depth ({max_depth}); "
                "nothing more was called"
            )
        child = self.fork(record)
        context = RunContext(
            call=child.call_inner,
            progress=progress,
            elicit=self.session.elicit,
            run_id=record.id,
            tenant=self.session.tenant,
            runs=self.registry.runs,
            resume=resume,
            steps=record.steps,
        )
        return await entry.composite.run(arguments, context)

    # -- unknown names ---------------------------------------------------------

    async def _waited_for_startup(self) -> bool:
        """An unknown name may belong to a backend still connecting for the first time, and `find_tools`
        would miss its tools: wait for those."""
        wait = self.registry.startup_wait
        return wait is not None and await wait()

    def _unknown(self, name: str, catalog: Catalog) -> types.CallToolResult:
        down = catalog.unavailable(name)
        if down is not None:
            return error_result(f"unknown tool {name!r}: {down}, so its tools are not available.")
        tenant = self.session.tenant
        close = closest(name, [e.name for e in catalog.visible() if e.visible_to(tenant)])
        hint = f" Did you mean: {', '.join(close)}?" if close else " List the tools to see what exists."
        return error_result(f"unknown tool {name!r}.{hint}")


_UNTRACED: contextlib.nullcontext[None] = contextlib.nullcontext()
"""The span of a call when tracing is off (no object made per call)."""
