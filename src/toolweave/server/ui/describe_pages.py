"""Regenerate a composite's description from its page: a preview first, saved only when asked.

Both steps go through `services.redescribe`, the code behind
`POST /api/v1/composite-tools/{id}/regenerate-description`: the preview saves nothing, and saving
(after any edit of the previewed text) is one more version, validated like every edit, so an
invalid text leaves the previous version serving.
"""

from __future__ import annotations

from typing import Any

from starlette.responses import RedirectResponse, Response

from toolweave.composite.definition import CompositeBase
from toolweave.server.ui.app import PageContext, UiApp
from toolweave.services import redescribe
from toolweave.services.errors import DefinitionError
from toolweave.store import NotFound, StoredComposite, StoreError

MAX_DESCRIPTION = 20_000
"""Characters a saved description may have (the validator bounds the definition as a whole too)."""


class DescribePages:
    def __init__(self, ui: UiApp) -> None:
        self.ui = ui

    async def _found(self, ctx: PageContext, name: str) -> StoredComposite | CompositeBase | None:
        service = ctx.runtime.definitions
        if service is None:
            return None
        try:
            return await service.repo.get(name, ctx.caller.tenant)
        except NotFound:
            return service.file_definition(name)

    def _render(self, ctx: PageContext, name: str, **values: Any) -> Response:
        template = "_describe.html" if ctx.request.headers.get("HX-Request") else "describe.html"
        base = {"name": name, "text": "", "source": "", "warning": None, "problem": "", "saveable": False}
        return self.ui.render(ctx, template, **{**base, **values})

    async def preview(self, ctx: PageContext) -> Response:
        """The regenerated description, in an editable box, with Save; nothing is stored yet."""
        name = ctx.request.path_params["name"]
        found = await self._found(ctx, name)
        if found is None:
            return self.ui.problem(ctx, 404, "Not found", f"There is no composite tool {name!r} you may see.")
        posted = await ctx.request.form()
        service = ctx.runtime.definitions
        assert service is not None
        try:
            rewritten = await redescribe.regenerate(service, found, use_llm=posted.get("use_llm") == "true")
        except DefinitionError as error:
            problems = "; ".join(str(p) for p in error.problems)
            return self._render(ctx, name, problem=f"{error.message}{': ' + problems if problems else ''}")
        return self._render(
            ctx,
            name,
            text=rewritten.text,
            source=rewritten.source,
            warning=rewritten.warning,
            saveable=isinstance(found, StoredComposite),
        )

    async def save(self, ctx: PageContext) -> Response:
        name = ctx.request.path_params["name"]
        found = await self._found(ctx, name)
        posted = await ctx.request.form()
        text = str(posted.get("description") or "").strip()
        source = "llm" if posted.get("source") == "llm" else "generated"
        if not isinstance(found, StoredComposite):
            return self.ui.problem(
                ctx,
                409,
                "Read-only",
                f"{name!r} is defined in the config file; change its description there.",
            )
        service = ctx.runtime.definitions
        assert service is not None
        problem = ""
        if not text:
            problem = "Not saved: the description is empty (agents choose tools by it)."
        elif len(text) > MAX_DESCRIPTION:
            problem = f"Not saved: the description is longer than {MAX_DESCRIPTION} characters."
        if problem:
            return self._render(
                ctx, name, text=text[:MAX_DESCRIPTION], source=source, problem=problem, saveable=True
            )
        try:
            await redescribe.save(service, found, ctx.caller.tenant, text, source, ctx.actor)
        except (DefinitionError, StoreError) as error:
            message = error.message if isinstance(error, DefinitionError) else str(error)
            details = "; ".join(str(p) for p in getattr(error, "problems", []))
            problem = f"Not saved: {message}{': ' + details if details else ''}"
            return self._render(ctx, name, text=text, source=source, problem=problem, saveable=True)
        response = RedirectResponse(f"/tools/{found.name}", status_code=303)
        if ctx.request.headers.get("HX-Request"):
            response.headers["HX-Redirect"] = f"/tools/{found.name}"
        return response
