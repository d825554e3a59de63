"""The audit log page (`/audit`, scope tools:admin): the same records and filters as `GET /api/v1/audit`,
newest first, a page at a time, with a link to the JSON-lines export."""

from __future__ import annotations

from urllib.parse import urlencode

from starlette.responses import Response

from toolweave.server.ui.app import PageContext, UiApp
from toolweave.store import ALL_TENANTS, AuditFilter

SHOWN = 100
"""Records on one page."""
_FILTERS = ("action", "objectId", "actor", "tenant")


class AuditPages:
    def __init__(self, ui: UiApp) -> None:
        self.ui = ui

    async def show(self, ctx: PageContext) -> Response:
        params = ctx.request.query_params
        given = {name: (params.get(name) or "").strip()[:200] for name in _FILTERS}
        where = AuditFilter(
            action=given["action"] or None, object_id=given["objectId"] or None, actor=given["actor"] or None
        )
        tenant: object = ctx.caller.tenant
        if tenant is None:
            wanted = given["tenant"]
            tenant = ALL_TENANTS if not wanted else (None if wanted == "-" else wanted)
        before_text = params.get("before") or ""
        before = int(before_text) if before_text.isdigit() and len(before_text) < 19 else None
        records = await ctx.runtime.audit.list(tenant, where, limit=SHOWN, before=before)  # type: ignore[arg-type]
        query = urlencode({name: value for name, value in given.items() if value})
        return self.ui.render(
            ctx,
            "audit.html",
            records=records,
            next=records[-1].id if len(records) == SHOWN else None,
            action=given["action"],
            object_id=given["objectId"],
            actor=given["actor"],
            tenant=given["tenant"],
            query=query,
        )
