"""Regenerate a composite's description: one home for the REST endpoint and the web UI's preview.

The definition's own opening is kept, the generated sections are rebuilt against the current
catalog (the operations' current descriptions and schemas), and with an LLM endpoint configured
the LLM rewrites the result (`services.llm`). Previewing saves nothing; `save` stores the text as
a new version through the definition service, so it is validated like any other edit.
"""

from __future__ import annotations

from toolweave.actor import Actor
from toolweave.composite.definition import CompositeBase
from toolweave.composite.workflow.toolhive import TOOLHIVE_KIND
from toolweave.problems import Problem
from toolweave.services import llm
from toolweave.services.definitions import DefinitionService, parse_definition
from toolweave.services.errors import DefinitionError
from toolweave.store import StoredComposite


async def regenerate(
    service: DefinitionService, found: StoredComposite | CompositeBase, *, use_llm: bool
) -> llm.Rewritten:
    """The new description of `found` (a stored composite, or the config file's model); saves nothing.
    DefinitionError 422 when the stored definition is invalid, 409 when it cannot be built now."""
    if isinstance(found, StoredComposite):
        model, problems = parse_definition(found.definition)
        if model is None:
            raise DefinitionError(422, "invalid_definition", "the stored definition is invalid", problems)
        tenant, name, errors = found.tenant, found.name, list(found.validation_errors or ())
    else:
        model, tenant, name = found, None, found.name
        errors = [str(p) for p in service.gateway.catalog.degraded.get(name, [])]
    description: str = getattr(model, "description", "") or ""
    draft_model = model.model_copy(update={"description": llm.opening_of(description)})
    entry = service.build_entry(draft_model, tenant)
    if entry is None:
        raise DefinitionError(
            409,
            "not_buildable",
            f"composite tool {name!r} cannot be built right now",
            [Problem("definition", str(p)) for p in errors],
        )
    text = entry.tool.description or ""
    if use_llm and llm.llm_configured():
        return await llm.rewrite(text, name, entry.tool.input_schema)
    return llm.Rewritten(text, "generated")


async def save(
    service: DefinitionService,
    stored: StoredComposite,
    tenant: str | None,
    text: str,
    source: str,
    actor: Actor | None = None,
) -> StoredComposite:
    """Store `text` as the description, a new version (validated like any edit; nothing changes if not)."""
    patch = (
        {"spec": {"description": text}}
        if stored.definition.get("kind") == TOOLHIVE_KIND
        else {"description": text}
    )
    return await service.update(
        stored.id,
        tenant,
        patch=patch,
        status=None,
        note=f"description regenerated ({source})",
        expected_version=None,
        actor=actor,
    )
