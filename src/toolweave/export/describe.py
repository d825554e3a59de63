"""The mini-prompt description writer (docs/export.md).

An agent decides whether and how to call a tool from its description alone,
so a composite's listed description is a small prompt: what the tool is for,
what it chooses between, every input (required first), and what comes back.
It is generated from the operations' / targets' own descriptions and schemas,
deterministically — the same definition and catalog always give the same
text, so exports diff cleanly and caches stay warm.

When is a description generated? A definition's own description is kept
verbatim when it already is a mini-prompt (it has a `# Required inputs` or
`# Optional inputs` section) or is at least `FULL_DESCRIPTION_CHARS` long; a
shorter one becomes the opening sentence of a generated mini-prompt.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from toolweave.schemas.read import properties_of, required_of

FULL_DESCRIPTION_CHARS: Final = 300
"""A definition description at least this long is used verbatim."""
SUMMARY_CHARS: Final = 200
"""Longest one-line summary of an operation / target in the generated list."""

_SECTION_MARKERS: Final = ("# Required inputs", "# Optional inputs")
_SENTENCE_END: Final = re.compile(r"(?<=[.!?])\s")
_NOT_A_VERB: Final = frozenset(
    {
        *("a", "an", "the", "this", "that", "these", "those", "it", "one", "all", "every", "each"),
        *("any", "some", "no", "my", "our", "your", "its", "their", "his", "her"),
        *("what", "which", "who", "whom", "whose", "when", "where", "why", "how", "whether"),
        *("for", "from", "with", "without", "in", "into", "on", "of", "to", "by", "about", "via"),
        *("if", "once", "current", "latest", "today", "now", "here", "there", "always", "only"),
    }
)
"""First words that start a phrase, not an order: "What time it is" must not become "Use this
tool to what time it is"."""


@dataclass(frozen=True, slots=True)
class ParamUsage:
    """Which operations / targets receive a unified parameter, and which of them require it."""

    used_by: tuple[str, ...]
    required_by: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class PartDoc:
    """One operation of a router or target of a fan-out, as the description lists it."""

    label: str
    """The slug (router) or exposed tool name (fan-out)."""
    description: str = ""
    title: str | None = None
    """A display name shown next to the label when it differs."""
    note: str | None = None
    """A short remark, e.g. `used when no rule matches`."""


def is_complete_description(description: str) -> bool:
    """True when a definition's own description should be listed verbatim."""
    text = description.strip()
    return len(text) >= FULL_DESCRIPTION_CHARS or any(marker in text for marker in _SECTION_MARKERS)


def describe_router(
    description: str,
    *,
    name: str,
    agent_driven: bool,
    input_schema: Mapping[str, Any],
    operations: Sequence[PartDoc],
    usage: Mapping[str, ParamUsage],
    output_fields: Mapping[str, str] | None = None,
) -> str:
    """The listed description of a router: its own when complete, else a generated mini-prompt."""
    if is_complete_description(description):
        return description.strip()
    if agent_driven:
        fallback = f"run one of the {name} operations; you choose which with `operation`"
        heading = "# Operations (set `operation` to one of these):"
    else:
        fallback = f"run {name}: it picks the right operation for the input automatically"
        heading = "# Operations (picked automatically from the input):"
    outputs = "Returns the result of the operation that ran, as that operation returns it."
    return mini_prompt(
        opening(description, fallback),
        input_schema,
        parts_heading=heading,
        parts=operations,
        usage=usage,
        part_labels=[part.label for part in operations],
        outputs=_with_fields(outputs, output_fields),
    )


_STRATEGY_TEXT: Final = {
    "parallel": "all are called at once with the inputs",
    "sequential": "they are called one after another with the inputs",
    "first_success": "all are called at once; the first successful result is returned and the rest cancelled",
}


def describe_fanout(
    description: str,
    *,
    strategy: str,
    input_schema: Mapping[str, Any],
    targets: Sequence[PartDoc],
    usage: Mapping[str, ParamUsage],
) -> str:
    """The listed description of a fan-out: its own when complete, else a generated mini-prompt."""
    if is_complete_description(description):
        return description.strip()
    fallback = f"call {len(targets)} tools with the same inputs and get all of their results"
    outputs = (
        "One section per target, headed by the target's tool name, followed by that tool's content. "
        "structuredContent.results lists {tool, isError, content, structuredContent} for each target. "
        "The call is an error when any target failed; the successful results are still included."
    )
    if strategy == "first_success":
        outputs = (
            "The first successful target's content, headed by its tool name "
            "(structuredContent.results holds that one result); an error listing every failure "
            "when no target succeeded."
        )
    return mini_prompt(
        opening(description, fallback),
        input_schema,
        parts_heading=f"# Targets ({_STRATEGY_TEXT.get(strategy, _STRATEGY_TEXT['parallel'])}):",
        parts=targets,
        usage=usage,
        part_labels=[part.label for part in targets],
        outputs=outputs,
    )


def mini_prompt(
    summary: str,
    input_schema: Mapping[str, Any],
    *,
    parts_heading: str | None = None,
    parts: Sequence[PartDoc] = (),
    usage: Mapping[str, ParamUsage] | None = None,
    part_labels: Sequence[str] = (),
    outputs: str = "",
) -> str:
    """Assemble the DoubleO mini-prompt: summary, parts, required and optional inputs, outputs."""
    sections = [summary]
    if parts_heading and parts:
        sections.append("\n".join([parts_heading, *(_part_line(part) for part in parts)]))
    sections.extend(_input_sections(input_schema, usage or {}, part_labels))
    if outputs:
        sections.append(f"# What the tool outputs:\n{outputs}")
    return "\n\n".join(sections)


def opening(description: str, fallback: str) -> str:
    """`Use this tool to …` from the definition's description (or a fallback).

    The prefix is added only when the description starts like an imperative
    ("Search across…"); a description that is already a sentence about the
    tool ("Searches…", "A tool that…") is kept as it is.
    """
    text = " ".join(description.split())
    if not text:
        return _sentence(f"Use this tool to {fallback}")
    if text.lower().startswith("use this tool"):
        return _sentence(text)
    first_word = text.split(" ", 1)[0].strip(",.:;!?")
    if not _looks_imperative(first_word):
        return _sentence(text)
    return _sentence(f"Use this tool to {first_word[0].lower()}{text[1:]}")


def _looks_imperative(word: str) -> bool:
    """`Search`, `scrape`: yes. `Searches`, `A`, `GitHub`, `URL-aware`: no (kept as written)."""
    bare = word.lower()
    if not word.isalpha() or bare in _NOT_A_VERB:
        return False
    if bare.endswith("s") and not bare.endswith("ss"):
        return False
    return word[1:].islower()


def _sentence(text: str) -> str:
    return text if text.endswith((".", "!", "?", ":")) else f"{text}."


def summary_of(description: str | None) -> str:
    """The first sentence of a description, on one line, at most `SUMMARY_CHARS` long."""
    text = " ".join((description or "").split())
    if not text:
        return ""
    first = _SENTENCE_END.split(text, maxsplit=1)[0]
    if len(first) > SUMMARY_CHARS:
        first = first[: SUMMARY_CHARS - 1].rstrip() + "…"
    return first


def _part_line(part: PartDoc) -> str:
    label = part.label
    if part.title and part.title != part.label:
        label = f"{label} ({part.title})"
    text = summary_of(part.description)
    line = f"- {label}: {text}" if text else f"- {label}"
    if part.note:
        line = f"{line} ({part.note})" if text else f"{line}: {part.note}"
    return line


def _input_sections(
    schema: Mapping[str, Any], usage: Mapping[str, ParamUsage], part_labels: Sequence[str]
) -> list[str]:
    properties = schema.get("properties")
    if not isinstance(properties, Mapping) or not properties:
        return ["# Inputs:\nThis tool takes no inputs."]
    required = set(required_of(schema))
    required_lines: list[str] = []
    optional_lines: list[str] = []
    for name, prop in properties.items():
        prop_schema = prop if isinstance(prop, Mapping) else {}
        is_required = name in required
        note = _usage_note(usage.get(name), part_labels, is_required)
        line = parameter_line(name, prop_schema, note)
        (required_lines if is_required else optional_lines).append(line)
    sections = []
    if required_lines:
        sections.append("\n".join(["# Required inputs (always include these):", *required_lines]))
    if optional_lines:
        sections.append("\n".join(["# Optional inputs (include when relevant):", *optional_lines]))
    return sections


def _usage_note(usage: ParamUsage | None, part_labels: Sequence[str], is_required: bool) -> str:
    if usage is None or not part_labels:
        return ""
    notes = []
    if usage.used_by and set(usage.used_by) != set(part_labels):
        notes.append(f"Only used by: {', '.join(usage.used_by)}.")
    if not is_required and usage.required_by:
        notes.append(f"Required by: {', '.join(usage.required_by)}.")
    return " ".join(notes)


def parameter_line(name: str, prop: Mapping[str, Any], note: str = "") -> str:
    """`- name (type; one of: …; default: …): description. Note.`"""
    facts = [fact for fact in (type_text(prop), _enum_text(prop), _default_text(prop)) if fact]
    head = f"- {name} ({'; '.join(facts)})" if facts else f"- {name}"
    text = " ".join(str(prop.get("description") or "").split())
    body = " ".join(part for part in (_sentence(text) if text else "", note) if part)
    return f"{head}: {body}" if body else head


def type_text(prop: Mapping[str, Any]) -> str:
    """A short human form of a property's JSON Schema type (`string`, `array of integer`, …)."""
    kind = prop.get("type")
    if isinstance(kind, list):
        return " or ".join(str(item) for item in kind)
    if kind == "array":
        items = prop.get("items")
        inner = type_text(items) if isinstance(items, Mapping) else ""
        return f"array of {inner}" if inner else "array"
    if isinstance(kind, str):
        return kind
    for key in ("anyOf", "oneOf"):
        variants = prop.get(key)
        if isinstance(variants, list):
            names = [type_text(v) for v in variants if isinstance(v, Mapping)]
            return " or ".join(dict.fromkeys(n for n in names if n))
    return "object" if "$ref" in prop else ""


def _enum_text(prop: Mapping[str, Any]) -> str:
    values = prop.get("enum")
    if not isinstance(values, list) or not values:
        return ""
    return "one of: " + ", ".join(_json(value) for value in values)


def _default_text(prop: Mapping[str, Any]) -> str:
    return f"default: {_json(prop['default'])}" if "default" in prop else ""


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def _with_fields(outputs: str, fields: Mapping[str, str] | None) -> str:
    if not fields:
        return outputs
    lines = [f"- {name}: {text}" if text else f"- {name}" for name, text in fields.items()]
    return "\n".join([f"{outputs} Its structured data has these fields:", *lines])


def output_fields(schemas: Sequence[Mapping[str, Any] | None]) -> dict[str, str]:
    """Fields of the given output schemas (first-seen order), each with its longest description."""
    fields: dict[str, str] = {}
    for schema in schemas:
        for name, prop in properties_of(schema).items():
            text = summary_of(prop.get("description"))
            if len(text) > len(fields.get(name, "")) or name not in fields:
                fields[name] = text
    return fields
