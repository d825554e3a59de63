"""The executor's one port: everything it needs from whoever hosts it, handed in at construction.

The `Gateway` builds one `Registry` from its config and passes it to every
executor it creates; the server adds its run store, its backend resolver (a
tenant's own credentials) and its call observer (metrics) when it builds the
gateway, never afterwards. The only thing that changes is `catalog`, swapped
whole when a new snapshot is built.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

import mcp_types as types

from toolweave.backends.base import Backend
from toolweave.catalog.catalog import Catalog, Entry
from toolweave.catalog.semantic import SemanticRanker
from toolweave.executor.admission import Admission
from toolweave.executor.call_rates import CallRates
from toolweave.executor.in_flight import InFlight
from toolweave.executor.policy import Policy
from toolweave.executor.session import Session
from toolweave.runs import RunStore
from toolweave.tracing import CallTracer

BackendResolver = Callable[[Backend, Session], Awaitable[Backend]]
"""`(backend, session) -> the backend to call for this session` (the same one unless a tenant has credentials)."""
CallObserver = Callable[[Entry, types.CallToolResult, float, str | None, str | None], None]
"""`(entry, result, seconds, the caller's tenant, the caller's subject)`, told after every call the executor dispatched; must be
cheap and never raise."""
StartupWait = Callable[[], Awaitable[bool]]
"""Waits (bounded) until every backend still making its first connection attempt has finished it and the
catalog has been rebuilt; True when it had to wait. A gateway that listens before its backends are up
uses it so that a call to a tool whose backend is still starting is answered, not refused as unknown."""
FoundListener = Callable[[Session, Sequence[str]], bool]
"""`(session, names)`, told the tools a `find_tools` call of `session` returned (search mode); True when
they are now listed to that session (`[search] list_found`). Must be cheap and never raise."""


@dataclass(frozen=True, slots=True)
class Limits:
    max_depth: int = 8
    """How deep composites may nest."""
    record_direct_calls: bool = False
    """Write a run record for direct (non-composite) calls too."""


class Registry:
    """What an executor reads: the catalog snapshot, policy, run store, limits, admission state,
    and the optional backend resolver and call observer."""

    __slots__ = (
        "admission",
        "call_rates",
        "catalog",
        "found_listeners",
        "in_flight",
        "limits",
        "observe",
        "policy",
        "resolve_backend",
        "runs",
        "semantic",
        "startup_wait",
        "tracer",
    )

    def __init__(
        self,
        catalog: Catalog,
        *,
        policy: Policy,
        runs: RunStore,
        limits: Limits,
        admission: Admission,
        resolve_backend: BackendResolver | None = None,
        observe: CallObserver | None = None,
        startup_wait: StartupWait | None = None,
        semantic: SemanticRanker | None = None,
        call_rates: CallRates | None = None,
        tracer: CallTracer | None = None,
    ) -> None:
        self.catalog = catalog
        """The current snapshot; the host swaps it whole (never mutates it)."""
        self.policy = policy
        self.runs = runs
        self.limits = limits
        self.admission = admission
        self.resolve_backend = resolve_backend
        self.observe = observe
        self.startup_wait = startup_wait
        self.semantic = semantic
        """Meaning-based ranking for `find_tools` (`[search.embeddings]`); None: lexical only."""
        self.call_rates = call_rates
        """Per-key and per-tenant call rates (`[limits]`), charged once per top-level call; None: unlimited."""
        self.tracer = tracer
        """Spans of every call (`toolweave.telemetry`); None: tracing is off, nothing is paid."""
        self.in_flight = InFlight()
        """The top-level calls running now (what a stopping gateway waits for, or stops; its contents change,
        the object never does)."""
        self.found_listeners: list[FoundListener] = []
        """Who lists found tools to their sessions (the MCP front adds itself; the list itself never changes)."""
