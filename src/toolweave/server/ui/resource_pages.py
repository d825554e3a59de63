"""Resources and prompts (`/resources`, `/prompts`): what the catalog serves an MCP client besides
tools, listed as `resources/list`, `resources/templates/list` and `prompts/list` answer the caller,
with a resource read and a prompt previewed through the backend that serves it — the same lookups
and the same scopes as the MCP methods (listing: `tools:read`; reading, previewing: `tools:call`).
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from typing import Any

import mcp_types as types
from starlette.responses import Response

from toolweave.server.ui.app import CALL, PageContext, UiApp

MAX_SHOWN_CHARS = 200_000
"""A resource's text (a prompt message's) shown at most; the rest is said to be cut."""
MAX_ARGUMENT_CHARS = 10_000
MAX_URI_CHARS = 2_000


@dataclass(frozen=True, slots=True)
class Shown:
    """One piece of a read resource or a prompt message, as the page shows it."""

    label: str
    text: str | None = None
    image: tuple[str, str] | None = None
    """(mime type, base64) of an image, drawn inline."""
    note: str = ""


def _cut(text: str) -> tuple[str, str]:
    if len(text) <= MAX_SHOWN_CHARS:
        return text, ""
    return text[:MAX_SHOWN_CHARS], f"cut at {MAX_SHOWN_CHARS:,} of {len(text):,} characters"


def _blob_size(blob: str) -> int:
    try:
        return len(base64.b64decode(blob, validate=False))
    except (binascii.Error, ValueError):
        return len(blob) * 3 // 4


def resource_parts(result: types.ReadResourceResult) -> list[Shown]:
    parts = []
    for content in result.contents:
        mime = content.mime_type or ""
        label = f"{content.uri}" + (f" ({mime})" if mime else "")
        if isinstance(content, types.TextResourceContents):
            text, note = _cut(content.text)
            parts.append(Shown(label, text=text, note=note))
        elif mime.startswith("image/") and len(content.blob) <= MAX_SHOWN_CHARS:
            parts.append(Shown(label, image=(mime, content.blob)))
        else:
            parts.append(Shown(label, note=f"{_blob_size(content.blob):,} bytes of binary content"))
    return parts


def prompt_parts(result: types.GetPromptResult) -> list[Shown]:
    parts = []
    for message in result.messages:
        content: Any = message.content
        if isinstance(content, types.TextContent):
            text, note = _cut(content.text)
            parts.append(Shown(message.role, text=text, note=note))
        elif isinstance(content, types.ImageContent) and len(content.data) <= MAX_SHOWN_CHARS:
            parts.append(Shown(message.role, image=(content.mime_type, content.data)))
        elif isinstance(content, types.EmbeddedResource):
            inner = resource_parts(types.ReadResourceResult(contents=[content.resource]))
            parts.extend(Shown(f"{message.role}: {p.label}", p.text, p.image, p.note) for p in inner)
        else:
            parts.append(Shown(message.role, note=f"{getattr(content, 'type', 'other')} content"))
    return parts


class ResourcePages:
    def __init__(self, ui: UiApp) -> None:
        self.ui = ui

    async def resources(self, ctx: PageContext) -> Response:
        gateway = ctx.runtime.gateway
        listed = sorted(gateway.resources().values(), key=lambda pair: str(pair[0].uri))
        templates = sorted(gateway.resource_template_pairs(), key=lambda pair: pair[0].uri_template)
        uri = str(ctx.request.query_params.get("uri") or "").strip()[:MAX_URI_CHARS]
        parts: list[Shown] = []
        problem = ""
        if uri:
            parts, problem = await self._read(ctx, uri)
        return self.ui.render(
            ctx,
            "resources.html",
            resources=[(resource, backend.name) for resource, backend in listed],
            templates=[(template, backend.name) for template, backend in templates],
            uri=uri,
            parts=parts,
            problem=problem,
            may_read=ctx.may(CALL),
        )

    async def _read(self, ctx: PageContext, uri: str) -> tuple[list[Shown], str]:
        """Read `uri` as `resources/read` would: a listed resource's backend, else a template's."""
        if not ctx.may(CALL):
            return [], "Reading a resource needs the tools:call scope."
        gateway = ctx.runtime.gateway
        found = gateway.resources().get(uri)
        backend = found[1] if found else gateway.backend_for_template(uri)
        if backend is None:
            return [], f"No backend serves {uri!r}: it is neither a listed resource nor matches a template."
        try:
            result = await backend.read_resource(uri)
        except Exception as error:  # noqa: BLE001 - the backend's failure is shown, named, not raised
            return [], f"{backend.name} could not read {uri!r}: {error or type(error).__name__}"
        return resource_parts(result), ""

    async def prompts(self, ctx: PageContext) -> Response:
        listed = sorted(ctx.runtime.gateway.prompts().items())
        return self.ui.render(
            ctx, "prompts.html", prompts=[(prompt, backend.name) for _name, (prompt, backend, _o) in listed]
        )

    async def prompt(self, ctx: PageContext) -> Response:
        name = ctx.request.path_params["name"]
        found = ctx.runtime.gateway.prompts().get(name)
        if found is None:
            return self.ui.problem(ctx, 404, "No such prompt", f"No backend serves a prompt {name!r}.")
        prompt, backend, original = found
        query = ctx.request.query_params
        arguments = {
            argument.name: str(query.get(f"arg-{argument.name}") or "")[:MAX_ARGUMENT_CHARS]
            for argument in prompt.arguments or []
        }
        parts: list[Shown] = []
        problem = ""
        if query.get("preview"):
            missing = [a.name for a in prompt.arguments or [] if a.required and not arguments.get(a.name)]
            if not ctx.may(CALL):
                problem = "Previewing a prompt needs the tools:call scope."
            elif missing:
                problem = "Required: " + ", ".join(missing)
            else:
                given = {key: value for key, value in arguments.items() if value}
                try:
                    result = await backend.get_prompt(original, given or None)
                    parts = prompt_parts(result)
                except Exception as error:  # noqa: BLE001 - shown, named
                    problem = f"{backend.name} could not give {name!r}: {error or type(error).__name__}"
        return self.ui.render(
            ctx,
            "prompt.html",
            prompt=prompt,
            backend=backend.name,
            arguments=arguments,
            parts=parts,
            problem=problem,
            may_preview=ctx.may(CALL),
        )
