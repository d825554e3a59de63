"""`GET /stats`: per-tool and per-backend health over the last hour or day (scope `tools:read`):
calls, error rate, p50/p95 latency and a per-minute (per-hour) series, from rolled-up rows
(`toolweave.services.stats`), never from the run records.

A tenant's key sees its own tenant's calls; the operator everyone's, one tenant's with `tenant=T`,
or its own (no tenant) with `tenant=-`.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Query

from toolweave.executor import Session
from toolweave.server.api.deps import READ, require, runtime, tenant_filter
from toolweave.server.api.models import BackendHealth, StatsOut, StatsPoint, ToolHealth
from toolweave.services.runtime import ServerRuntime
from toolweave.services.stats import ALL, Report
from toolweave.store.stats import percentile

router = APIRouter(prefix="/stats", tags=["stats"])


def _at(epoch: int) -> datetime:
    return datetime.fromtimestamp(epoch, UTC)


def stats_out(report: Report) -> StatsOut:
    tools = [
        ToolHealth(
            tool=health.name,
            backend=health.backend,
            **health.summary(),
            series=[
                StatsPoint(
                    at=_at(bucket), calls=t.calls, errors=t.errors, p95Ms=_ms(percentile(t.histogram, 0.95))
                )
                for bucket, t in health.series
            ],
        )
        for health in report.tools
    ]
    backends = [BackendHealth(backend=health.name, **health.summary()) for health in report.backends]
    return StatsOut.model_validate(
        {
            "window": report.window,
            "from": _at(report.start),
            "to": _at(report.end),
            "bucketSeconds": report.span,
            "tools": tools,
            "backends": backends,
        }
    )


def _ms(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


@router.get(
    "",
    response_model=StatsOut,
    response_model_by_alias=True,
    summary="Per-tool health: calls, errors, latency",
)
async def get_stats(
    window: Annotated[
        Literal["hour", "day"], Query(description="The last hour (per minute) or day (per hour)")
    ] = "hour",
    tenant: Annotated[
        str | None,
        Query(max_length=200, description="Only this tenant's calls (the operator's choice; `-`: its own)"),
    ] = None,
    caller: Session = Depends(require(READ)),
    rt: ServerRuntime = Depends(runtime),
) -> StatsOut:
    report = await rt.stats.report(window, tenant_filter(caller, tenant, ALL))
    return stats_out(report)
