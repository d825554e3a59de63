"""The pages of a live Try it call: follow it, answer its question, cancel it (`live_calls`)."""

from __future__ import annotations

from typing import Any

from starlette.responses import Response

from toolweave.composite.base import ElicitOutcome
from toolweave.server.ui.app import PageContext, UiApp
from toolweave.server.ui.live_calls import LiveCall, LiveCalls, Question
from toolweave.server.ui.try_view import read_arguments

ACTIONS = ("accept", "decline", "cancel")


class LivePages:
    def __init__(self, ui: UiApp, live: LiveCalls) -> None:
        self.ui = ui
        self.live = live

    async def _call(self, ctx: PageContext) -> LiveCall | None:
        """The call, running here or on another gateway (its shared state)."""
        return await self.live.find(ctx.browser.id, ctx.request.path_params["call_id"][:64])

    def _fragment(
        self, ctx: PageContext, call: LiveCall, notice: str = "", problems: dict[str, str] | None = None
    ) -> Response:
        return self.ui.render(ctx, "_live.html", call=call, notice=notice, problems=problems or {})

    def _gone(self, ctx: PageContext) -> Response:
        return self.ui.problem(
            ctx, 404, "No such call", "This call is unknown here: it was started elsewhere or has expired."
        )

    async def follow(self, ctx: PageContext) -> Response:
        """The call as it stands: polled by its page until it has finished."""
        call = await self._call(ctx)
        return self._gone(ctx) if call is None else self._fragment(ctx, call)

    async def answer(self, ctx: PageContext) -> Response:
        """The person's answer to the question shown; a bad value is reported at its field, unsent."""
        call = await self._call(ctx)
        if call is None:
            return self._gone(ctx)
        form = await ctx.request.form()
        question = call.find_question(str(form.get("question") or ""))
        if question is None or question.answer.done():
            return self._fragment(
                ctx, call, "That question is no longer waiting (answered, timed out, or the call ended)."
            )
        action = str(form.get("action") or "accept")
        if action not in ACTIONS:
            return self._fragment(ctx, call, f"Unknown answer {action[:40]!r}: accept, decline or cancel.")
        outcome, problems = _outcome(question, action, form)
        if outcome is None:
            return self._fragment(ctx, call, "Fix the answer; nothing was sent yet.", problems)
        if not await self.live.answer(call, question, outcome):
            return self._fragment(
                ctx, call, "That question is no longer waiting (answered, timed out, or the call ended)."
            )
        return self._fragment(ctx, call, "Answer sent; the call goes on.")

    async def cancel(self, ctx: PageContext) -> Response:
        call = await self._call(ctx)
        if call is None:
            return self._gone(ctx)
        if await self.live.stop(call):
            await ctx.runtime.audit.record(
                ctx.actor,
                "call.cancelled",
                tenant=ctx.caller.tenant,
                object_type="call",
                object_id=call.id,
                object_name=call.tool,
            )
        return self._fragment(ctx, call, "Cancelling…" if call.running else "")


def _outcome(question: Question, action: str, form: Any) -> tuple[ElicitOutcome | None, dict[str, str]]:
    if action != "accept":
        return ElicitOutcome(action), {}  # type: ignore[arg-type]
    if question.approval:
        return ElicitOutcome("accept", {"approve": True}), {}
    read = read_arguments(question.fields, form)
    for item in question.fields:
        if item.required and item.name not in read.arguments and item.name not in read.problems:
            read.problems[item.name] = "an answer is required"
    if read.problems:
        return None, read.problems
    return ElicitOutcome("accept", read.arguments), {}
