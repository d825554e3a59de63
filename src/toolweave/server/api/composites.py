"""`/composite-tools`: create, read, edit, delete, versions, operations, export, descriptions.

`{id}` is a composite's id or its name. File-defined composites are listed
and readable (`source: "file"`, `readOnly: true`); changing them through the
API is a 409 `read_only` naming the file. Every change is validated before
anything is stored (see `toolweave.services.definitions`).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Body, Depends, Path, Response

from toolweave.actor import Actor
from toolweave.composite.definition import CompositeBase
from toolweave.composite.workflow.toolhive import TOOLHIVE_KIND
from toolweave.executor import Session
from toolweave.export import export_tool
from toolweave.server.api import present
from toolweave.server.api.deps import ADMIN, READ, actor, definitions, require
from toolweave.server.api.errors import ApiError
from toolweave.server.api.models import (
    CompositeCreate,
    CompositeDetail,
    CompositeList,
    CompositeUpdate,
    OperationCreate,
    RegenerateRequest,
    RegenerateResponse,
    VersionList,
    VersionOut,
)
from toolweave.services import redescribe
from toolweave.services.definitions import DefinitionService
from toolweave.store import NotFound, StoredComposite

router = APIRouter(prefix="/composite-tools", tags=["composite tools"])

IdPath = Annotated[str, Path(max_length=200, description="The composite tool's id or name")]
Format = Literal["mcp", "openai", "openai-responses", "anthropic", "langchain", "universal"]


async def _find(
    service: DefinitionService, tool_id: str, tenant: str | None
) -> StoredComposite | CompositeBase:
    """The stored composite visible to the tenant, else the file's composite of that name, else 404."""
    try:
        return await service.repo.get(tool_id, tenant)
    except NotFound:
        model = service.file_definition(tool_id)
        if model is None:
            raise
        return model


async def _writable(service: DefinitionService, tool_id: str, tenant: str | None) -> StoredComposite:
    found = await _find(service, tool_id, tenant)
    if not isinstance(found, StoredComposite):
        source = service.gateway.config.source or "the config file"
        raise ApiError(
            409,
            "read_only",
            f"composite tool {tool_id!r} is defined in {source} and is read-only through the API; change it there",
        )
    return found


def _detail(
    service: DefinitionService, found: StoredComposite | CompositeBase, caller: Session
) -> CompositeDetail:
    if isinstance(found, StoredComposite):
        return present.stored_detail(service, found, caller)
    return present.file_detail(service.gateway, found, caller)


@router.get(
    "", response_model=CompositeList, summary="List composite tools (the tenant's, shared and the file's)"
)
async def list_composites(
    caller: Session = Depends(require(READ)), service: DefinitionService = Depends(definitions)
) -> CompositeList:
    stored = [present.stored_detail(service, row, caller) for row in await service.repo.list(caller.tenant)]
    files = [
        present.file_detail(service.gateway, model, caller)
        for model in service.gateway.config.composite_tools
    ]
    return CompositeList(compositeTools=[*files, *stored])


@router.post("", response_model=CompositeDetail, status_code=201, summary="Create a composite tool")
async def create_composite(
    body: CompositeCreate,
    response: Response,
    caller: Session = Depends(require(ADMIN)),
    service: DefinitionService = Depends(definitions),
    who: Actor = Depends(actor),
) -> CompositeDetail:
    """Validated first (definition, name clashes, a trial build against the live catalog); stored and
    served only when valid. An `active` tool is listed to MCP clients at once (list_changed)."""
    stored = await service.create(caller.tenant, body.definition, body.status, body.note, actor=who)
    response.headers["Location"] = f"/api/v1/composite-tools/{stored.id}"
    return present.stored_detail(service, stored, caller)


@router.get("/{id}", response_model=CompositeDetail, summary="One composite tool")
async def get_composite(
    id: IdPath, caller: Session = Depends(require(READ)), service: DefinitionService = Depends(definitions)
) -> CompositeDetail:
    return _detail(service, await _find(service, id, caller.tenant), caller)


@router.patch("/{id}", response_model=CompositeDetail, summary="Edit a composite tool")
async def update_composite(
    id: IdPath,
    body: CompositeUpdate,
    caller: Session = Depends(require(ADMIN)),
    service: DefinitionService = Depends(definitions),
    who: Actor = Depends(actor),
) -> CompositeDetail:
    """`definition` is merged into the current one (JSON merge patch). A rejected change stores nothing;
    the previous version keeps serving."""
    if body.definition is None and body.status is None:
        raise ApiError(422, "invalid_request", "nothing to change: give a definition patch or a status")
    current = await _writable(service, id, caller.tenant)
    stored = await service.update(
        current.id,
        caller.tenant,
        patch=body.definition,
        status=body.status,
        note=body.note,
        expected_version=body.expectedVersion,
        actor=who,
    )
    return present.stored_detail(service, stored, caller)


@router.delete("/{id}", status_code=204, response_class=Response, summary="Delete a composite tool")
async def delete_composite(
    id: IdPath,
    caller: Session = Depends(require(ADMIN)),
    service: DefinitionService = Depends(definitions),
    who: Actor = Depends(actor),
) -> Response:
    current = await _writable(service, id, caller.tenant)
    await service.delete(current.id, caller.tenant, actor=who)
    return Response(status_code=204)


@router.get("/{id}/versions", response_model=VersionList, summary="Every version of a composite tool")
async def versions(
    id: IdPath, caller: Session = Depends(require(READ)), service: DefinitionService = Depends(definitions)
) -> VersionList:
    """Oldest first. File-defined tools have no stored versions (an empty list)."""
    found = await _find(service, id, caller.tenant)
    if not isinstance(found, StoredComposite):
        return VersionList(versions=[])
    rows = await service.repo.versions(found.id, caller.tenant)
    return VersionList(
        versions=[
            VersionOut(version=v.version, definition=v.definition, note=v.note, createdAt=v.created_at)
            for v in rows
        ]
    )


# -- operations (routers) ---------------------------------------------------------------


def _router_definition(current: StoredComposite) -> dict[str, Any]:
    definition = dict(current.definition)
    if current.kind != "router" or definition.get("kind") == TOOLHIVE_KIND:
        raise ApiError(
            422,
            "not_a_router",
            f"composite tool {current.name!r} is a {current.kind}; only routers have operations",
            [("kind", f"is {current.kind!r}")],
        )
    return definition


@router.post("/{id}/operations", response_model=CompositeDetail, status_code=201, summary="Add an operation")
async def add_operation(
    id: IdPath,
    body: OperationCreate,
    caller: Session = Depends(require(ADMIN)),
    service: DefinitionService = Depends(definitions),
    who: Actor = Depends(actor),
) -> CompositeDetail:
    """Adds the operation (and its rules; `default: true` makes it the default operation) as a new version."""
    current = await _writable(service, id, caller.tenant)
    definition = _router_definition(current)
    slug = body.operation.get("slug")
    if any(isinstance(op, dict) and op.get("slug") == slug for op in definition.get("operations") or []):
        raise ApiError(
            409,
            "conflict",
            f"composite tool {current.name!r} already has an operation {slug!r}",
            [("operation.slug", "already used")],
        )
    patch: dict[str, Any] = {"operations": [*(definition.get("operations") or []), body.operation]}
    if body.rules:
        patch["rules"] = [*(definition.get("rules") or []), *body.rules]
    if body.default:
        patch["default_operation"] = slug
    stored = await service.update(
        current.id,
        caller.tenant,
        patch=patch,
        status=None,
        note=body.note,
        expected_version=body.expectedVersion,
        actor=who,
    )
    return present.stored_detail(service, stored, caller)


@router.delete("/{id}/operations/{opId}", response_model=CompositeDetail, summary="Remove an operation")
async def remove_operation(
    id: IdPath,
    opId: Annotated[str, Path(max_length=200, description="The operation's slug")],
    caller: Session = Depends(require(ADMIN)),
    service: DefinitionService = Depends(definitions),
    who: Actor = Depends(actor),
) -> CompositeDetail:
    """Also removes the rules that route to it and, if it was the default, the default. Refused (422)
    when what remains is not a valid router."""
    current = await _writable(service, id, caller.tenant)
    definition = _router_definition(current)
    operations = [
        op
        for op in definition.get("operations") or []
        if not (isinstance(op, dict) and op.get("slug") == opId)
    ]
    if len(operations) == len(definition.get("operations") or []):
        raise ApiError(404, "not_found", f"composite tool {current.name!r} has no operation {opId!r}")
    patch: dict[str, Any] = {"operations": operations}
    rules = definition.get("rules") or []
    kept = [rule for rule in rules if not (isinstance(rule, dict) and rule.get("operation") == opId)]
    if len(kept) != len(rules):
        patch["rules"] = kept
    if definition.get("default_operation") == opId:
        patch["default_operation"] = None
    stored = await service.update(
        current.id, caller.tenant, patch=patch, status=None, note=None, expected_version=None, actor=who
    )
    return present.stored_detail(service, stored, caller)


# -- export and descriptions ------------------------------------------------------------


@router.get(
    "/{id}/tools/{format}", response_model=dict[str, Any], summary="Export as an agent tool definition"
)
async def export(
    id: IdPath,
    format: Annotated[
        Format, Path(description="mcp, openai, openai-responses, anthropic, langchain or universal")
    ],
    caller: Session = Depends(require(READ)),
    service: DefinitionService = Depends(definitions),
) -> dict[str, Any]:
    """The tool in that format, with its mini-prompt description. A draft or disabled tool is exported
    as it would be served; one that does not build is a 409 listing its problems."""
    found = await _find(service, id, caller.tenant)
    if isinstance(found, StoredComposite):
        entry = service.served_entry(found) or service.trial_entry(found.definition, found.tenant)
        problems = list(found.validation_errors or ())
    else:
        entry = service.gateway.catalog.get(found.name)
        entry = entry if entry is not None and entry.composite is not None else None
        problems = [str(p) for p in service.gateway.catalog.degraded.get(found.name, [])]
    if entry is None:
        raise ApiError(
            409,
            "not_buildable",
            f"composite tool {id!r} cannot be built right now, so it has no export",
            [("definition", problem) for problem in problems],
        )
    return export_tool(entry.tool, format)


@router.post(
    "/{id}/regenerate-description", response_model=RegenerateResponse, summary="Regenerate the description"
)
async def regenerate_description(
    id: IdPath,
    body: Annotated[RegenerateRequest | None, Body()] = None,
    caller: Session = Depends(require(ADMIN)),
    service: DefinitionService = Depends(definitions),
    who: Actor = Depends(actor),
) -> RegenerateResponse:
    """Rebuilds the mini-prompt from the operations' current descriptions and schemas (deterministic);
    with an LLM endpoint configured, the LLM rewrites it. `save` stores it as a new version."""
    options = body or RegenerateRequest()
    # only saving needs a stored definition: a file-defined tool's description can be previewed
    found = await (_writable if options.save else _find)(service, id, caller.tenant)
    rewritten = await redescribe.regenerate(service, found, use_llm=options.useLlm)
    version = None
    if options.save and isinstance(found, StoredComposite):
        stored = await redescribe.save(service, found, caller.tenant, rewritten.text, rewritten.source, who)
        version = stored.version
    return RegenerateResponse(
        description=rewritten.text,
        source=rewritten.source,  # type: ignore[arg-type]
        saved=options.save,
        version=version,
        warning=rewritten.warning,
    )
