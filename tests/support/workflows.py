"""Building workflows for engine tests against the in-memory catalog (`support.fakes.FakeCatalog`).

The call function (`support.fakes.FakeCalls`) records an ordered event log
(`start`/`end`/`cancel` per call), so tests assert overlap and ordering from the
log, never from wall-clock thresholds. These are unit tests of the engine: every
inner call goes through `RunContext.call`, exactly as the gateway's executor
would route it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import mcp_types as types

from support.fakes import FakeCatalog, exposed
from support.results import meta
from toolweave.composite.workflow.build import WorkflowComposite, build_workflow
from toolweave.composite.workflow.config import WorkflowDef
from toolweave.composite.workflow.validation import workflow_problems
from toolweave.results import text


def error(message: str = "boom") -> types.CallToolResult:
    return types.CallToolResult(content=[text(message)], is_error=True)


def definition(steps: list[dict[str, Any]], **fields: Any) -> WorkflowDef:
    data: dict[str, Any] = {"name": "wf", "description": "A test workflow", "steps": steps, **fields}
    return WorkflowDef.model_validate(data)


def build(steps: list[dict[str, Any]], catalog: FakeCatalog, **fields: Any) -> WorkflowComposite:
    defn = definition(steps, **fields)
    assert workflow_problems(defn) == [], workflow_problems(defn)
    return build_workflow(defn, catalog)


def params(*names: str, **schemas: Mapping[str, Any]) -> dict[str, Any]:
    """A parameters schema declaring `names` (any type) and `schemas` (given property schemas)."""
    properties: dict[str, Any] = {name: {} for name in names}
    properties.update({name: dict(schema) for name, schema in schemas.items()})
    return {"type": "object", "properties": properties}


def catalog_for(*references: str, **schemas: Mapping[str, Any]) -> FakeCatalog:
    """A catalog with each reference as a tool; `schemas` maps exposed names to their properties."""
    catalog = FakeCatalog()
    for reference in references:
        catalog.add(reference, schemas.get(exposed(reference)))
    return catalog


def statuses(result: types.CallToolResult) -> dict[str, str]:
    return {step["id"]: step["status"] for step in meta(result)["steps"]}
