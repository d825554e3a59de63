"""What a tool made from an HTTP operation needs at call time: where each argument goes.

An `OperationSpec` is plain data: the OpenAPI converter and the declared-actions
compiler both produce it, the HTTP caller (`toolweave.backends.http`) consumes it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

Location = Literal["path", "query", "header", "cookie"]
BodyKind = Literal["json", "form", "multipart", "text"]
ValueShape = Literal["primitive", "array", "object"]


@dataclass(frozen=True, slots=True)
class ParamSpec:
    """One parameter: the tool argument `prop` sent as `name` in `location`, serialised by `style`/`explode`."""

    prop: str
    name: str
    location: Location
    style: str
    explode: bool
    shape: ValueShape = "primitive"
    allow_reserved: bool = False
    json: bool = False
    """`content: application/json` parameters: the value is sent as JSON text."""
    delimiter: str | None = None
    """Swagger 2.0 `collectionFormat` tsv: a tab (no OpenAPI 3 style has it)."""


@dataclass(frozen=True, slots=True)
class BodySpec:
    """The request body: the whole of argument `prop`, or the arguments named in `fields` (flattened)."""

    kind: BodyKind
    media_type: str
    prop: str | None = None
    fields: dict[str, str] = field(default_factory=dict)
    """Flattened body: tool argument → body property."""
    required: bool = False


@dataclass(frozen=True, slots=True)
class OperationSpec:
    """One HTTP operation as a tool."""

    tool: str
    method: str
    path: str
    """The path template (`/pets/{petId}`), appended to the base URL."""
    description: str
    input_schema: dict[str, Any]
    params: tuple[ParamSpec, ...] = ()
    body: BodySpec | None = None
    output_schema: dict[str, Any] | None = None
    annotations: dict[str, Any] = field(default_factory=dict)
    title: str | None = None
    needs_auth: bool = True
    """False when the operation declares `security: []` (no credentials are sent)."""
    accept: str = "application/json, */*;q=0.5"
    operation_id: str | None = None
    pointer: str = ""
    """Where the operation is in its document (`/paths/~1pets/get`), for messages."""
    headers: tuple[tuple[str, str], ...] = ()
    """Fixed header templates (declared actions); `{arg}` placeholders filled per call."""
    fixed_query: tuple[tuple[str, str], ...] = ()
    """Literal query pairs of a declared action's URL (`?units=metric`), sent as written."""

    @property
    def label(self) -> str:
        """`GET /pets/{petId}`: how messages name the operation (never the final URL, which may hold secrets)."""
        return f"{self.method} {self.path}"


@dataclass(frozen=True, slots=True)
class Problem:
    """A problem in a document: where (a JSON pointer), which operation, and what."""

    pointer: str
    message: str
    operation: str | None = None

    def __str__(self) -> str:
        where = f"#{self.pointer}" if self.pointer else "#"
        concerning = f" ({self.operation})" if self.operation else ""
        return f"{where}{concerning}: {self.message}"


@dataclass(slots=True)
class Conversion:
    """The tools of a document, and every operation left out with the reason."""

    operations: list[OperationSpec] = field(default_factory=list)
    skipped: list[Problem] = field(default_factory=list)
    """Operations that did not become tools (each names why)."""
    notes: list[Problem] = field(default_factory=list)
    """Operations that became tools with something left out (an optional body of an unsupported type...)."""
    filtered: int = 0
    """Operations left out by `include` / `exclude`."""
    base_url: str | None = None
    version: str = ""
    title: str = ""
