"""`ToolExecutor`: the only door to a tool. Every call — from an MCP client, the
REST API, the CLI, the Python API, or a composite's inner step — comes through
here, and every failure comes back as an `isError` result.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import mcp_types as types

from toolweave.catalog.catalog import Catalog, Entry, is_destructive
from toolweave.composite.base import ElicitFn, ElicitUnavailable, ProgressFn, RunContext
from toolweave.executor.admission import Pools
from toolweave.fields import split_tool_ref
from toolweave.results import error_result, json_text, toolweave_meta
from toolweave.runs import RunRecord, StepRecord, new_run_id
from toolweave.schemas import redact

if TYPE_CHECKING:
    from toolweave.gateway import Gateway

logger = logging.getLogger("toolweave.executor")
approval_log = logging.getLogger("toolweave.approval")

FIND_TOOLS = "find_tools"
CALL_TOOL = "call_tool"

CANCELLED_BEFORE = "cancelled before execution; the call was not made"
CANCELLED_WHILE_RUNNING = "cancelled while running; the call may have been partly done"

_on_admitted: contextvars.ContextVar[Callable[[], None] | None] = contextvars.ContextVar(
    "toolweave_on_admitted", default=None
)
"""Set by `execute_batch` for each call's task: told when the call holds its permits and starts."""

resuming: contextvars.ContextVar[list[RunRecord] | None] = contextvars.ContextVar(
    "toolweave_resuming", default=None
)
"""Set by `executor.resume`: the next recorded call continues this run record (popped once)."""


@dataclass(slots=True)
class Session:
    """Who is calling: one per MCP session, API request tree, or `Gateway` user."""

    tenant: str | None = None
    scopes: frozenset[str] = frozenset({"tools:read", "tools:call", "tools:admin"})
    elicit: ElicitFn | None = None
    label: str = "local"
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class BatchCall:
    id: str
    name: str
    arguments: dict[str, Any]


class ToolExecutor:
    """Dispatches calls against the gateway's current catalog for one session."""

    def __init__(
        self, gateway: Gateway, session: Session | None = None, *, pools: Pools | None = None, depth: int = 0
    ) -> None:
        self.gateway = gateway
        self.session = session or Session()
        policy = gateway.config.policy
        self.pools = pools or Pools.create(policy.read_width, policy.concurrent_width)
        self.depth = depth

    # -- single calls ----------------------------------------------------------

    async def call(
        self, name: str, arguments: Any = None, *, progress: ProgressFn | None = None
    ) -> types.CallToolResult:
        """Call an exposed tool as a client would (hidden tools are unknown here)."""
        if arguments is None:
            arguments = {}
        catalog = self.gateway.catalog
        if catalog.index is not None and name in (FIND_TOOLS, CALL_TOOL) and catalog.get(name) is None:
            return await self._search_mode(name, arguments, progress)
        entry = catalog.get(name)
        if entry is None or entry.hidden or not self._visible_to_tenant(entry):
            return self._unknown(name, catalog)
        return await self._dispatch(entry, arguments, progress)

    async def call_inner(
        self, reference: str, arguments: Any, progress: ProgressFn | None = None
    ) -> types.CallToolResult:
        """An inner call of a composite: references may be `backend/tool`, hidden tools are callable."""
        catalog = self.gateway.catalog
        entry = catalog.lookup(reference)
        if entry is None or not self._visible_to_tenant(entry):
            return self._unknown(reference, catalog)
        return await self._dispatch(entry, arguments if arguments is not None else {}, progress)

    def classify(self, name: str, arguments: Any = None) -> str:
        """The admission class of a call by exposed name ('short' for unknown or denied).

        In search mode `find_tools` is a read and `call_tool` takes the class of the tool it calls.
        """
        catalog = self.gateway.catalog
        entry = catalog.get(name)
        if entry is None and catalog.index is not None and name in (FIND_TOOLS, CALL_TOOL):
            if name == FIND_TOOLS:
                return "read"
            target = arguments.get("name") if isinstance(arguments, Mapping) else None
            if not isinstance(target, str) or target in (FIND_TOOLS, CALL_TOOL):
                return "short"
            return self.classify(target)
        if entry is None or entry.hidden or not self._visible_to_tenant(entry):
            return "short"
        if self._denial(entry) is not None:
            return "short"
        return entry.tool_class

    async def _dispatch(
        self, entry: Entry, arguments: Any, progress: ProgressFn | None
    ) -> types.CallToolResult:
        observe = self.gateway.call_observer
        if observe is None:
            return await self._checked(entry, arguments, progress)
        started = time.perf_counter()
        result = await self._checked(entry, arguments, progress)
        observe(entry, result, time.perf_counter() - started)
        return result

    async def _checked(
        self, entry: Entry, arguments: Any, progress: ProgressFn | None
    ) -> types.CallToolResult:
        denial = self._denial(entry)
        if denial is not None:
            return error_result(denial)
        if not isinstance(arguments, Mapping):
            return error_result(
                f"arguments for {entry.name!r} must be a JSON object, got {type(arguments).__name__}"
            )
        arguments = dict(arguments)
        problems = entry.validator.problems(arguments)
        if problems:
            return error_result(
                f"invalid arguments for {entry.name!r}: " + "; ".join(problems) + ". Nothing was called."
            )
        if self._needs_approval(entry):
            refusal = await self._ask_approval(entry, arguments)
            if refusal is not None:
                return error_result(refusal)
        pool = self.pools.for_class(entry.tool_class)
        tool_cap = self.gateway.tool_semaphore(entry)
        try:
            if tool_cap is None:
                async with pool:
                    _admitted()
                    return await self._run(entry, arguments, progress)
            async with tool_cap, pool:
                _admitted()
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
        if entry.composite is None:
            record = self.gateway.config.gateway.record_direct_calls
            if not record:
                return await self._call_backend(entry, arguments, progress)
            return await self._recorded(entry, arguments, progress)
        return await self._recorded(entry, arguments, progress)

    async def _call_backend(
        self, entry: Entry, arguments: dict[str, Any], progress: ProgressFn | None
    ) -> types.CallToolResult:
        """The backend call itself; a tenant's own credentials (connections) are picked here, at call time."""
        backend = entry.backend
        assert backend is not None and entry.backend_tool is not None
        resolver = self.gateway.backend_resolver
        if resolver is not None:
            backend = await resolver(backend, self.session)
        return await backend.call_tool(
            entry.backend_tool, arguments, timeout=entry.timeout, progress=progress
        )

    async def _recorded(
        self, entry: Entry, arguments: dict[str, Any], progress: ProgressFn | None
    ) -> types.CallToolResult:
        runs = self.gateway.runs
        pending = resuming.get()
        resume = pending.pop() if pending else None
        record = resume or RunRecord(
            id=new_run_id(),
            tool=entry.name,
            kind=entry.kind if entry.composite else "direct",
            tenant=self.session.tenant,
            arguments=redact(arguments, entry.secrets),
        )
        started = time.perf_counter()
        await _record(runs, "start_run", record)
        status = "completed"
        try:
            if entry.composite is not None:
                if self.depth >= self.gateway.config.gateway.max_depth:
                    result = error_result(
                        f"composite {entry.name!r} nests deeper than gateway.max_depth "
                        f"({self.gateway.config.gateway.max_depth}); nothing more was called"
                    )
                else:
                    child = self.fork()
                    context = RunContext(
                        call=child.call_inner,
                        progress=progress,
                        elicit=self.session.elicit,
                        run_id=record.id,
                        tenant=self.session.tenant,
                        runs=runs,
                        resume=resume,
                    )
                    result = await entry.composite.run(arguments, context)
            else:
                result = await self._call_backend(entry, arguments, progress)
        except asyncio.CancelledError:
            record.status = "cancelled"
            record.latency_ms = _ms(started)
            await _record(runs, "finish_run", record)
            raise
        latency = _ms(started)
        meta = (
            toolweave_meta(result)
            if entry.composite is not None
            else (result.meta or {}).get("toolweave", {})
        )
        if entry.composite is not None:
            meta["run_id"] = record.id
            meta["latency_ms"] = latency
        status = meta.get("status") or ("failed" if result.is_error else "completed")
        record.status = status
        record.operation = meta.get("operation")
        record.reason = meta.get("reason")
        record.steps = [
            StepRecord(
                id=s["id"],
                status=s["status"],
                attempts=s.get("attempts", 0),
                latency_ms=s.get("latency_ms", 0),
            )
            for s in meta.get("steps", [])
            if isinstance(s, Mapping) and "id" in s
        ] or record.steps
        if result.is_error:
            record.error = _first_text(result)
        record.latency_ms = latency
        record.finished_at = time.time()
        await _record(runs, "finish_run", record)
        return result

    def fork(self) -> ToolExecutor:
        """The executor for a composite's inner calls: same session, pools of the next level."""
        return ToolExecutor(self.gateway, self.session, pools=self.pools.fork(), depth=self.depth + 1)

    # -- policy and approval ---------------------------------------------------

    def _denial(self, entry: Entry) -> str | None:
        session = self.session
        if "tools:call" not in session.scopes:
            return f"calling {entry.name!r} needs the tools:call scope"
        return self.gateway.policy.denial(entry.name, session.tenant, session.scopes)

    def _visible_to_tenant(self, entry: Entry) -> bool:
        owner = self.gateway.owner_of(entry.name)
        return owner is None or owner == self.session.tenant

    def _needs_approval(self, entry: Entry) -> bool:
        policy = self.gateway.policy
        if policy.approval.matches(entry.name):
            return True
        return bool(policy.approve_destructive and entry.composite is None and is_destructive(entry.tool))

    async def _ask_approval(self, entry: Entry, arguments: dict[str, Any]) -> str | None:
        elicit = self.session.elicit
        shown = json_text(redact(arguments, entry.secrets))
        if elicit is None:
            approval_log.info("approval for %s denied: the client cannot be asked", entry.name)
            return (
                f"calling {entry.name!r} needs the user's approval, but this client cannot be asked "
                "(no elicitation support); the call was not made"
            )
        message = f"toolweave wants to call {entry.name} with {shown}. Allow it?"
        schema = {"type": "object", "properties": {"approve": {"type": "boolean", "title": "Approve"}}}
        try:
            outcome = await elicit(message, schema, 300.0)
        except ElicitUnavailable as error:
            approval_log.info("approval for %s denied: %s", entry.name, error)
            return (
                f"calling {entry.name!r} needs the user's approval, but the client cannot be asked ({error}); "
                "the call was not made"
            )
        except TimeoutError:
            approval_log.info("approval for %s denied: no answer in time", entry.name)
            return f"the user did not approve the call to {entry.name!r} in time; it was not made"
        except Exception as error:  # noqa: BLE001 - a broken back channel is a refusal, not a crash
            approval_log.info("approval for %s denied: asking failed: %s", entry.name, error)
            return (
                f"calling {entry.name!r} needs the user's approval, but asking failed ({error}); "
                "it was not made"
            )
        approved = outcome.action == "accept" and bool((outcome.content or {}).get("approve", True))
        approval_log.info(
            "approval for %s: %s", entry.name, "granted" if approved else f"refused ({outcome.action})"
        )
        if not approved:
            how = "answered no" if outcome.action == "accept" else outcome.action
            return f"the user refused the call to {entry.name!r} ({how}); it was not made"
        return None

    # -- search mode -----------------------------------------------------------

    async def _search_mode(
        self, name: str, arguments: Any, progress: ProgressFn | None
    ) -> types.CallToolResult:
        catalog = self.gateway.catalog
        if not isinstance(arguments, Mapping):
            return error_result(f"arguments for {name!r} must be a JSON object")
        if name == FIND_TOOLS:
            query = arguments.get("query")
            limit = arguments.get("limit", 10)
            if (
                not isinstance(query, str)
                or not isinstance(limit, int)
                or isinstance(limit, bool)
                or limit < 1
            ):
                return error_result("find_tools needs {query: string, limit?: positive integer}")
            assert catalog.index is not None
            found = [
                t for t in catalog.index.search(query, limit * 2) if self._tool_listed_for_tenant(t.name)
            ]
            payload = {"tools": [_tool_summary(tool) for tool in found[:limit]]}
            return types.CallToolResult(
                content=[types.TextContent(type="text", text=json_text(payload))], structured_content=payload
            )
        target = arguments.get("name")
        inner_args = arguments.get("arguments", {})
        if not isinstance(target, str):
            return error_result(
                "call_tool needs {name: string, arguments?: object}; use find_tools to find names"
            )
        if target in (FIND_TOOLS, CALL_TOOL):
            return error_result("call_tool cannot call itself or find_tools")
        return await self.call(target, inner_args, progress=progress)

    def _tool_listed_for_tenant(self, name: str) -> bool:
        owner = self.gateway.owner_of(name)
        return owner is None or owner == self.session.tenant

    def _unknown(self, name: str, catalog: Catalog) -> types.CallToolResult:
        down = self._backend_down(name)
        if down is not None:
            return error_result(f"unknown tool {name!r}: {down}, so its tools are not available.")
        close = _suggestions(name, [e.name for e in catalog.visible() if self._visible_to_tenant(e)])
        hint = f" Did you mean: {', '.join(close)}?" if close else " List the tools to see what exists."
        return error_result(f"unknown tool {name!r}.{hint}")

    def _backend_down(self, name: str) -> str | None:
        """Why the backend a name points at (`backend__tool`, `backend/tool`) has no tools, if it has none."""
        gateway = self.gateway
        separator = gateway.config.gateway.separator
        parts = split_tool_ref(name)
        prefix = parts[0] if parts else name.split(separator, 1)[0] if separator in name else None
        if not prefix:
            return None
        backend = gateway.backends.get(prefix)
        if backend is not None and backend.status != "connected":
            why = f": {backend.last_error}" if backend.last_error else ""
            return f"backend {prefix!r} is not connected ({backend.status}{why})"
        config = gateway.config.backend(prefix)
        if config is not None and not config.enabled:
            return f"backend {prefix!r} is disabled in the config"
        return None

    # -- batches ---------------------------------------------------------------

    async def execute_batch(
        self, calls: Sequence[BatchCall | Mapping[str, Any]], *, cancel: asyncio.Event | None = None
    ) -> list[types.CallToolResult]:
        """Run a model's batch of calls: contiguous same-class runs concurrently, a barrier
        between runs, results in input order — one result per call, always."""
        batch = [_as_batch_call(call, index) for index, call in enumerate(calls)]
        results: list[types.CallToolResult | None] = [None] * len(batch)
        for start, end in _runs([self.classify(call.name, call.arguments) for call in batch]):
            if cancel is not None and cancel.is_set():
                break
            await self._run_concurrently(batch, results, range(start, end), cancel)
        return [result if result is not None else error_result(CANCELLED_BEFORE) for result in results]

    async def _run_concurrently(
        self,
        batch: list[BatchCall],
        results: list[types.CallToolResult | None],
        indexes: range,
        cancel: asyncio.Event | None,
    ) -> None:
        admitted: set[int] = set()

        async def one(index: int) -> None:
            call = batch[index]
            _on_admitted.set(lambda: admitted.add(index))
            try:
                results[index] = await self.call(call.name, call.arguments)
            except asyncio.CancelledError:
                raise
            except Exception as error:  # one result per call, always
                logger.exception("batch call %s to %s failed", call.id, call.name)
                results[index] = error_result(f"calling {call.name!r} failed inside the gateway: {error}")

        tasks = [asyncio.create_task(one(index)) for index in indexes]
        if cancel is None:
            await asyncio.gather(*tasks)
            return
        watcher = asyncio.create_task(cancel.wait())
        try:
            await asyncio.wait([*tasks, watcher], return_when=asyncio.FIRST_COMPLETED)
            pending = [t for t in tasks if not t.done()]
            while pending and not cancel.is_set():
                await asyncio.wait([*pending, watcher], return_when=asyncio.FIRST_COMPLETED)
                pending = [t for t in tasks if not t.done()]
            for task in pending:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            for index, task in zip(indexes, tasks, strict=True):
                if task.cancelled() and results[index] is None:
                    # a call still waiting for approval or a permit never started
                    message = CANCELLED_WHILE_RUNNING if index in admitted else CANCELLED_BEFORE
                    results[index] = error_result(message)
        finally:
            watcher.cancel()


def _admitted() -> None:
    hook = _on_admitted.get()
    if hook is not None:
        hook()


def _runs(classes: list[str]) -> list[tuple[int, int]]:
    """Contiguous runs of the same admission class, as (start, end) index pairs."""
    runs: list[tuple[int, int]] = []
    start = 0
    for index in range(1, len(classes) + 1):
        if index == len(classes) or classes[index] != classes[start]:
            runs.append((start, index))
            start = index
    return runs


def _as_batch_call(call: BatchCall | Mapping[str, Any], index: int) -> BatchCall:
    if isinstance(call, BatchCall):
        return call
    if not isinstance(call, Mapping):
        name, arguments = getattr(call, "name", ""), getattr(call, "arguments", {})
        return BatchCall(id=str(index), name=str(name), arguments=arguments)
    arguments = call.get("arguments")
    return BatchCall(
        id=str(call.get("id", index)),
        name=str(call.get("name", "")),
        arguments=arguments if arguments is not None else {},
    )


def _tool_summary(tool: types.Tool) -> dict[str, Any]:
    return {"name": tool.name, "description": tool.description or "", "inputSchema": tool.input_schema}


def _suggestions(name: str, names: Collection[str]) -> list[str]:
    import difflib

    lowered = name.lower()
    contains = [n for n in names if lowered and (lowered in n.lower() or n.lower().endswith(lowered))]
    close = difflib.get_close_matches(name, list(names), n=3, cutoff=0.6)
    return list(dict.fromkeys(contains[:3] + close))[:3]


def _first_text(result: types.CallToolResult) -> str:
    for item in result.content:
        if isinstance(item, types.TextContent):
            return item.text[:2000]
    return "error"


def _ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 3)


async def _safely(awaitable: Any) -> None:
    """Recording a run must never fail the call it records."""
    try:
        await awaitable
    except Exception:
        logger.exception("recording a run failed")


async def _record(runs: Any, method: str, record: RunRecord) -> None:
    """Record without waiting for the database when the store can (`SqlRunStore`'s write-behind)."""
    nowait = getattr(runs, method + "_nowait", None)
    if nowait is None:
        await _safely(getattr(runs, method)(record))
        return
    try:
        nowait(record)
    except Exception:
        logger.exception("recording a run failed")
