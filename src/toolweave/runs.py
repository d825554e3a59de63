"""Run records: what every composite call did. The core defines the interface;
`toolweave.store` implements it on a database, `MemoryRunStore` keeps the
last few in memory when no database is configured (tests, the Python API).
"""

from __future__ import annotations

import time
import uuid
from collections import OrderedDict
from dataclasses import asdict, dataclass, field
from typing import Any, Literal, Protocol, TypeGuard, get_args

from toolweave.actor import Actor

MAX_LISTED = 500
"""The most run records one listing returns (REST `GET /runs` and `toolweave runs --limit`)."""


def visible_to(run_tenant: str | None, tenant: str | None) -> bool:
    """Who may see a run: a tenant exactly its own runs; no tenant (the operator) every run.

    The one statement of it: the stores' `get_run` and `list_runs` filter by it, so the REST
    API, the web UI and `resume` read a run through the store and check nothing more.
    """
    return tenant is None or run_tenant == tenant


RunStatus = Literal[
    "running", "completed", "failed", "timed_out", "cancelled", "interrupted", "input_required"
]
"""A run's status (`RunRecord.status`)."""

RUN_STATUSES: frozenset[str] = frozenset(get_args(RunStatus))


def is_run_status(value: object) -> TypeGuard[RunStatus]:
    """Whether `value` (read from a result's `_meta` or a stored record) is one of the `RunStatus`es."""
    return isinstance(value, str) and value in RUN_STATUSES


StepStatus = Literal["running", "completed", "failed", "skipped", "timed_out", "cancelled", "interrupted"]
"""A step's status in a run record: a workflow step's, or a fan-out target's (`StepRecord.status`);
`interrupted` only as shown, for a step still running when its run was interrupted."""

STEP_STATUSES: frozenset[str] = frozenset(get_args(StepStatus))


def is_step_status(value: object) -> TypeGuard[StepStatus]:
    """Whether `value` (read from a result's `_meta`) is one of the `StepStatus`es."""
    return isinstance(value, str) and value in STEP_STATUSES


@dataclass(slots=True)
class StepRecord:
    id: str
    status: StepStatus
    attempts: int = 0
    latency_ms: float = 0.0
    output: Any = None
    error: str | None = None
    start_ms: float | None = None
    """When the step started, in milliseconds after its run started (None: not known, e.g. a step
    that never started, or a record written before start times were kept)."""

    def summary(self) -> dict[str, Any]:
        found = {
            "id": self.id,
            "status": self.status,
            "attempts": self.attempts,
            "latency_ms": self.latency_ms,
        }
        if self.start_ms is not None:
            found["start_ms"] = self.start_ms
        return found


@dataclass(slots=True)
class RunRecord:
    id: str
    tool: str
    kind: str
    """fanout | router | workflow | direct"""
    tenant: str | None = None
    status: RunStatus = "running"
    subject: str | None = None
    """Who called (`Session.caller`: an IdP's `sub`, an API key's label, `local`)."""
    arguments: dict[str, Any] = field(default_factory=dict)
    """Already redacted (writeOnly / format: password values replaced)."""
    operation: str | None = None
    reason: str | None = None
    steps: list[StepRecord] = field(default_factory=list)
    error: str | None = None
    latency_ms: float = 0.0
    started_at: float = field(default_factory=time.time)
    finished_at: float | None = None
    state: dict[str, Any] = field(default_factory=dict)
    """Resumable state for durable workflows (checkpointed step outputs)."""
    events: list[dict[str, Any]] = field(default_factory=list)
    """`tool_result` trace events of the calls the run made (`executor.trace`), in the order they ended."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def new_run_id() -> str:
    return uuid.uuid4().hex


class RunStore(Protocol):
    """Where runs are recorded: every method the executor, a workflow and `resume` call.

    A store with `write_behind` is written through the `*_nowait` methods (they
    queue, the caller never waits for the database); any other store is awaited.
    """

    write_behind: bool
    """True: record through `start_run_nowait` / `checkpoint_nowait` / `finish_run_nowait`."""
    durable: bool
    """True when records outlive the process, so an interrupted run can be `claim`ed and resumed."""

    async def start_run(self, record: RunRecord) -> None: ...

    def start_run_nowait(self, record: RunRecord) -> None: ...

    async def checkpoint(self, run_id: str, step: StepRecord, state: dict[str, Any] | None = None) -> None:
        """Persist one finished (or started) step so an interrupted run can resume."""
        ...

    def checkpoint_nowait(
        self, run_id: str, step: StepRecord, state: dict[str, Any] | None = None
    ) -> None: ...

    async def finish_run(self, record: RunRecord) -> None: ...

    def finish_run_nowait(self, record: RunRecord) -> None: ...

    async def claim(
        self, run_id: str, tenant: str | None = None, *, actor: Actor | None = None
    ) -> RunRecord | None:
        """Move an interrupted run back to `running` under this process, atomically; None if taken.
        A store that keeps an audit log records `actor`'s resumption in the same transaction."""
        ...

    async def get_run(self, run_id: str, tenant: str | None = None) -> RunRecord | None:
        """The run if `tenant` may see it (`visible_to`), else None."""
        ...

    def lost(self, run_id: str) -> bool:
        """True once this process found that another gateway took the run over (it lost the run's
        lease): the run's executor stops, and nothing more of this process's is recorded for it."""
        ...

    async def list_runs(
        self,
        *,
        tenant: str | None = None,
        tool: str | None = None,
        status: str | None = None,
        limit: int = 50,
    ) -> list[RunRecord]: ...


class MemoryRunStore:
    """Keeps the newest `capacity` runs in memory; bounded so long-lived gateways stay flat."""

    write_behind = False
    durable = False

    def __init__(self, capacity: int = 1000) -> None:
        self._runs: OrderedDict[str, RunRecord] = OrderedDict()
        self._capacity = capacity

    def start_run_nowait(self, record: RunRecord) -> None:
        self._keep(record)

    def checkpoint_nowait(self, run_id: str, step: StepRecord, state: dict[str, Any] | None = None) -> None:
        self._checkpoint(run_id, step, state)

    def finish_run_nowait(self, record: RunRecord) -> None:
        self._runs[record.id] = record

    def lost(self, run_id: str) -> bool:
        """Never: one process, no lease to lose."""
        return False

    async def claim(
        self, run_id: str, tenant: str | None = None, *, actor: Actor | None = None
    ) -> RunRecord | None:
        """Nothing outlives this process, so nothing is ever interrupted and claimable."""
        return None

    def _keep(self, record: RunRecord) -> None:
        self._runs[record.id] = record
        while len(self._runs) > self._capacity:
            self._runs.popitem(last=False)

    def _checkpoint(self, run_id: str, step: StepRecord, state: dict[str, Any] | None) -> None:
        record = self._runs.get(run_id)
        if record is None:
            return
        record.steps = [s for s in record.steps if s.id != step.id] + [step]
        if state is not None:
            record.state.update(state)

    async def start_run(self, record: RunRecord) -> None:
        self._keep(record)

    async def checkpoint(self, run_id: str, step: StepRecord, state: dict[str, Any] | None = None) -> None:
        self._checkpoint(run_id, step, state)

    async def finish_run(self, record: RunRecord) -> None:
        self._runs[record.id] = record

    async def get_run(self, run_id: str, tenant: str | None = None) -> RunRecord | None:
        record = self._runs.get(run_id)
        if record is None or not visible_to(record.tenant, tenant):
            return None
        return record

    async def list_runs(
        self,
        *,
        tenant: str | None = None,
        tool: str | None = None,
        status: str | None = None,
        limit: int = 50,
    ) -> list[RunRecord]:
        out = []
        for record in reversed(self._runs.values()):
            if not visible_to(record.tenant, tenant):
                continue
            if tool is not None and record.tool != tool:
                continue
            if status is not None and record.status != status:
                continue
            out.append(record)
            if len(out) >= limit:
                break
        return out
