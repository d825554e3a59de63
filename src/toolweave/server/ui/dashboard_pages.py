"""The dashboard (`/dashboard`): calls, errors and latency per tool over the last hour or day, each
tool's buckets drawn on the server as an SVG chart (`charts.py`); the numbers of `GET /api/v1/stats`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from starlette.responses import Response

from toolweave.server.ui.app import PageContext, UiApp
from toolweave.server.ui.charts import health_chart
from toolweave.services.stats import ALL

MAX_TOOLS = 200
"""Tools drawn at most (the busiest)."""


@dataclass(frozen=True, slots=True)
class _Row:
    name: str
    backend: str
    summary: dict[str, Any]
    chart: str


class DashboardPages:
    def __init__(self, ui: UiApp) -> None:
        self.ui = ui

    async def show(self, ctx: PageContext) -> Response:
        window = "day" if ctx.request.query_params.get("window") == "day" else "hour"
        tenant = ctx.caller.tenant if ctx.caller.tenant is not None else ALL
        report = await ctx.runtime.stats.report(window, tenant)  # type: ignore[arg-type]
        tools = [
            _Row(
                h.name,
                h.backend,
                h.summary(),
                health_chart(h.series, f"{h.name}: calls, errors and p95 latency"),
            )
            for h in report.tools[:MAX_TOOLS]
        ]
        backends = [_Row(h.name, h.backend, h.summary(), "") for h in report.backends]
        return self.ui.render(ctx, "dashboard.html", window=window, tools=tools, backends=backends)
