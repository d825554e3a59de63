"""What the REST API, and `toolweave keys` / `runs`, show of a key and of a run.

Apart from `present` (which needs the gateway, the executor, the exporters) so that those commands,
which read only the database, import pydantic and the models alone (0.5 s CPU less a process).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING

from toolweave.server.api.models import KeyOut, RunOut, StepOut

if TYPE_CHECKING:
    from toolweave.runs import RunRecord
    from toolweave.store import ApiKeyInfo


def run_out(record: RunRecord) -> RunOut:
    return RunOut(
        id=record.id,
        tool=record.tool,
        kind=record.kind,
        tenant=record.tenant,
        status=record.status,
        subject=record.subject,
        arguments=dict(record.arguments),
        operation=record.operation,
        reason=record.reason,
        steps=[
            StepOut(
                id=s.id,
                status=s.status,
                attempts=s.attempts,
                latencyMs=s.latency_ms,
                startMs=s.start_ms,
                error=s.error,
            )
            for s in record.steps
        ],
        error=record.error,
        latencyMs=record.latency_ms,
        startedAt=_utc(record.started_at),
        finishedAt=_utc(record.finished_at) if record.finished_at is not None else None,
        events=list(record.events),
        traceId=_trace_id(record),
    )


def key_out(info: ApiKeyInfo) -> KeyOut:
    """What `GET /keys` and `toolweave keys list --json` show of a key: everything but the key."""
    return KeyOut(
        id=info.id,
        tenant=info.tenant,
        name=info.name,
        prefix=info.prefix,
        scopes=list(info.scopes),
        createdAt=info.created_at,
        lastUsedAt=info.last_used_at,
        revokedAt=info.revoked_at,
    )


def _utc(epoch: float) -> datetime:
    return datetime.fromtimestamp(epoch, UTC)


def _trace_id(record: RunRecord) -> str | None:
    found = record.state.get("trace_id") if isinstance(record.state, dict) else None
    return found if isinstance(found, str) else None
