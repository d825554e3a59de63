"""Derived annotations of routers and fan-outs: conservative, and never over-claimed."""

from __future__ import annotations

from typing import Any

import pytest

from support.configs import parse_composite_def
from support.fakes import FakeCatalog, tool
from toolweave.composite.annotations import combined_hints, composite_annotations, effective_hints
from toolweave.composite.base import ResolvedTool
from toolweave.composite.definition import AnnotationsDef
from toolweave.composite.errors import BuildError
from toolweave.composite.router.build import build_router


def resolved(name: str, **hints: Any) -> ResolvedTool:
    return ResolvedTool(name=name, tool=tool(name, {}, **hints), backend=name.split("__")[0])


READER = resolved("a__read", read_only=True)
SAFE_WRITER = resolved("a__write", destructive=False, idempotent=True, open_world=False)
UNANNOTATED = resolved("a__plain")


def test_mcp_defaults_for_absent_hints() -> None:
    hints = effective_hints(UNANNOTATED.tool)
    assert (hints.read_only, hints.destructive, hints.idempotent, hints.open_world) == (
        False,
        True,
        False,
        True,
    )


def test_read_only_counts_as_non_destructive_and_idempotent() -> None:
    hints = effective_hints(resolved("x__r", read_only=True, destructive=True).tool)
    assert (hints.read_only, hints.destructive, hints.idempotent, hints.open_world) == (
        True,
        False,
        True,
        True,
    )


def test_combination_is_conservative() -> None:
    all_read = combined_hints([READER, resolved("b__read", read_only=True, open_world=False)])
    assert all_read.read_only and not all_read.destructive and all_read.idempotent and all_read.open_world
    mixed = combined_hints([READER, SAFE_WRITER])
    assert not mixed.read_only and not mixed.destructive and mixed.open_world
    with_plain = combined_hints([READER, SAFE_WRITER, UNANNOTATED])
    assert with_plain.destructive and not with_plain.idempotent


def test_listed_annotations() -> None:
    annotations = composite_annotations([READER], None, "Title")
    assert annotations.read_only_hint is True
    assert annotations.destructive_hint is False
    assert annotations.idempotent_hint is True
    assert annotations.open_world_hint is True
    assert annotations.title == "Title"


def test_more_cautious_declarations_are_allowed() -> None:
    declared = AnnotationsDef(readOnlyHint=False, openWorldHint=True, title="Mine")
    annotations = composite_annotations(
        [resolved("b__r", read_only=True, open_world=False)], declared, "Other"
    )
    assert annotations.read_only_hint is False
    assert annotations.open_world_hint is True
    assert annotations.title == "Mine"


@pytest.mark.parametrize(
    ("declared", "targets", "path", "culprit"),
    [
        (
            {"readOnlyHint": True},
            [READER, SAFE_WRITER],
            "annotations.readOnlyHint",
            "a__write is not read-only",
        ),
        (
            {"destructiveHint": False},
            [READER, UNANNOTATED],
            "annotations.destructiveHint",
            "a__plain is destructive",
        ),
        (
            {"idempotentHint": True},
            [SAFE_WRITER, UNANNOTATED],
            "annotations.idempotentHint",
            "a__plain is not idempotent",
        ),
        (
            {"openWorldHint": False},
            [SAFE_WRITER, READER],
            "annotations.openWorldHint",
            "a__read reaches an open world",
        ),
    ],
)
def test_over_claiming_is_a_build_error(
    declared: dict[str, Any], targets: list[ResolvedTool], path: str, culprit: str
) -> None:
    with pytest.raises(BuildError) as caught:
        composite_annotations(targets, AnnotationsDef(**declared))
    assert len(caught.value.issues) == 1
    assert caught.value.issues[0][0] == path
    assert culprit in caught.value.issues[0][1]
    assert "claims more safety than the targets" in caught.value.issues[0][1]


def test_every_over_claim_is_reported() -> None:
    declared = AnnotationsDef(
        readOnlyHint=True, destructiveHint=False, idempotentHint=True, openWorldHint=False
    )
    with pytest.raises(BuildError) as caught:
        composite_annotations([UNANNOTATED], declared)
    assert [path for path, _ in caught.value.issues] == [
        "annotations.readOnlyHint",
        "annotations.destructiveHint",
        "annotations.idempotentHint",
        "annotations.openWorldHint",
    ]


def test_router_over_claim_is_reported_with_other_build_problems() -> None:
    catalog = FakeCatalog([tool("a__read", {"u": {}}, read_only=True), tool("b__write", {"u": {}})])
    definition = parse_composite_def(
        {
            "name": "r",
            "annotations": {"readOnlyHint": True},
            "operations": [
                {"slug": "r", "tool": "a/read", "parameter_mapping": {"x": "nope"}},
                {"slug": "w", "tool": "b/write"},
            ],
            "default_operation": "r",
        }
    )
    with pytest.raises(BuildError) as caught:
        build_router(definition, catalog)
    assert [path for path, _ in caught.value.issues] == [
        "operations[0].parameter_mapping.x",
        "annotations.readOnlyHint",
    ]
