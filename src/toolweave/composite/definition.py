"""What every composite definition has in common: name, description, annotations, and the tools
it calls (which the loader checks and the catalog orders builds by)."""

from __future__ import annotations

from typing import Any, NamedTuple

from pydantic import Field, field_validator

from toolweave.fields import EXPOSED_NAME_RE, StrictModel


class ToolReference(NamedTuple):
    """A tool a definition calls: where it is named (relative path) and the reference as written."""

    path: str
    tool: str
    """`backend/tool`, `backend.tool` or an exposed name (another composite's)."""


class AnnotationsDef(StrictModel):
    """MCP tool annotations a definition may state; checked against its targets."""

    title: str | None = None
    readOnlyHint: bool | None = None
    destructiveHint: bool | None = None
    idempotentHint: bool | None = None
    openWorldHint: bool | None = None


class CompositeBase(StrictModel):
    kind: str
    name: str
    description: str = ""
    title: str | None = None
    annotations: AnnotationsDef | None = None
    tags: list[str] = Field(default_factory=list)
    meta: dict[str, Any] = Field(default_factory=dict)

    @field_validator("name")
    @classmethod
    def _name_is_exposable(cls, value: str) -> str:
        if not EXPOSED_NAME_RE.match(value):
            raise ValueError(f"composite name {value!r} must match ^[a-zA-Z0-9_-]{{1,64}}$")
        return value

    def tool_references(self) -> list[ToolReference]:
        """Every tool the definition calls, with where it is named."""
        return []
