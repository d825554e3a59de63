"""Workflow definitions: every problem reported at once, each with its path (ToolHive's rules as the checklist)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from toolweave.composite.workflow.config import WorkflowDef
from toolweave.composite.workflow.graph import find_composite_cycles, find_cycles, format_cycle
from toolweave.config import ConfigError, parse_config

BACKENDS = [{"name": name, "python": "m"} for name in ("k8s", "slack", "osv")]


def issues(definition: dict[str, Any]) -> list[str]:
    """The loader's issues for one workflow definition, with the `composite_tools[0].` prefix removed."""
    entry = {"name": "wf", "description": "Deploy things", **definition}
    try:
        parse_config({"backends": BACKENDS, "composite_tools": [entry]})
    except ConfigError as error:
        return [str(issue).removeprefix("composite_tools[0].") for issue in error.issues]
    return []


def tool_step(step_id: str, **fields: Any) -> dict[str, Any]:
    return {"id": step_id, "tool": "k8s/apply", **fields}


PARAMS = {"type": "object", "properties": {"env": {"type": "string"}, "go": {"type": "boolean"}}}


def test_a_valid_definition_has_no_issues() -> None:
    definition = {
        "parameters": PARAMS,
        "steps": [
            tool_step(
                "apply",
                arguments={"ns": "{{ params.env }}"},
                onError={"action": "retry", "retryCount": 3, "retryDelay": "1s"},
            ),
            tool_step(
                "wait",
                dependsOn=["apply"],
                condition="{{ steps.apply.output.ok }}",
                defaultResults={"ready": False},
            ),
            {
                "id": "notify",
                "tool": "slack.send",
                "dependsOn": ["wait"],
                "arguments": {"ready": "{{ steps.wait.output.ready }}"},
            },
        ],
        "timeout": "30m",
        "failureMode": "abort",
    }
    assert issues(definition) == []
    model = WorkflowDef.model_validate({"name": "wf", "description": "d", **definition})
    assert model.timeout == 1800 and model.steps[1].depends_on == ["apply"]


def test_defaults_are_toolhive_defaults() -> None:
    model = WorkflowDef.model_validate({"name": "wf", "description": "d", "steps": [tool_step("a")]})
    assert (model.timeout, model.failure_mode, model.max_parallel) == (1800.0, "abort", 10)
    assert (
        model.steps[0].kind == "tool" and model.steps[0].timeout is None and model.steps[0].item_var == "item"
    )


def test_snake_case_keys_are_accepted_too() -> None:
    step = tool_step(
        "a", depends_on=[], on_error={"action": "retry", "retry_count": 2}, default_results={"x": 1}
    )
    assert issues({"steps": [step]}) == []


def test_every_problem_is_reported_at_once_with_paths() -> None:
    definition = {
        "description": "",
        "parameters": {"type": "string"},
        "failureMode": "explode",
        "steps": [
            tool_step("a", dependsOn=["ghost"]),
            tool_step("a"),
            {"id": "c", "type": "loop"},
            tool_step("d", condition="{{ params.env "),
            tool_step("e", onError={"action": "retry"}),
        ],
    }
    assert issues(definition) == [
        "description: is required: agents choose tools by their description",
        "failureMode: unknown value 'explode' (use abort, continue)",
        "parameters.type: must be 'object' (got 'string')",
        "steps[0].dependsOn[0]: unknown step 'ghost'",
        "steps[1].id: duplicate step id 'a' (also steps[0])",
        "steps[2].type: unknown step type 'loop' (use tool, elicitation or forEach)",
        "steps[3].condition: template syntax error: unexpected end of template, expected 'end of print statement'. "
        "(in '{{ params.env ')",
        "steps[4].onError.retryCount: must be at least 1 when action is retry",
    ]


def test_cycles_are_named() -> None:
    steps = [
        tool_step("a", dependsOn=["c"]),
        tool_step("b", dependsOn=["a"]),
        tool_step("c", dependsOn=["b"]),
        tool_step("d"),
    ]
    assert issues({"steps": steps}) == ["steps[0].dependsOn: dependency cycle: a → c → b → a"]
    assert issues({"steps": [tool_step("a", dependsOn=["a"])]}) == [
        "steps[0].dependsOn[0]: a step cannot depend on itself"
    ]


def test_parameters_must_be_a_valid_object_schema() -> None:
    assert issues(
        {"parameters": {"type": "object", "properties": {"x": {"type": "strng"}}}, "steps": [tool_step("a")]}
    ) == [
        "parameters: not a valid JSON Schema: 'strng' is not valid under any of the given schemas (at properties/x/type)"
    ]


def test_steps_are_required_and_limited() -> None:
    assert issues({"steps": []}) == ["steps: a workflow needs at least one step"]
    many = [tool_step(f"s{i}") for i in range(201)]
    assert issues({"steps": many}) == ["steps: too many steps: 201 (the limit is 200)"]


def test_tool_references_are_checked() -> None:
    assert issues({"steps": [{"id": "a"}, tool_step("b", tool="bad ref!")]}) == [
        "steps[0].tool: is required for a tool step",
        "steps[1].tool: 'bad ref!' is not a tool reference (use backend/tool or an exposed name)",
    ]
    assert issues({"steps": [tool_step("a", tool="nowhere/x")]}) == [
        "steps[0].tool: 'nowhere/x' names unknown backend 'nowhere' (known backends: k8s, osv, slack)"
    ]


def test_ambiguous_steps_need_a_type() -> None:
    assert issues({"steps": [tool_step("a", message="hi")]}) == [
        "steps[0]: has both 'tool' and 'message': give 'type' to say which kind of step it is",
        "steps[0].message: not allowed on a tool step (type 'tool')",
    ]


def test_template_references_are_checked() -> None:
    steps = [
        tool_step("a", arguments={"x": "{{ params.nope }}", "y": "{{ secrets.key }}"}),
        tool_step("b", arguments={"z": "{{ steps.a.output.v }}", "w": "{{ steps.ghost.output }}"}),
        tool_step(
            "c", dependsOn=["a"], arguments={"self": "{{ steps.c.output }}", "ok": "{{ steps.a.output }}"}
        ),
    ]
    assert issues({"parameters": PARAMS, "steps": steps}) == [
        "steps[0].arguments.x: unknown parameter 'nope' (not in parameters.properties)",
        "steps[0].arguments.y: unknown name 'secrets' (templates see params, steps, workflow)",
        "steps[1].arguments.w: refers to unknown step 'ghost'",
        "steps[1].arguments.z: uses step 'a' but does not depend on it; add it to dependsOn",
        "steps[2].arguments.self: a step cannot use its own result",
    ]


def test_transitive_dependencies_are_enough() -> None:
    steps = [
        tool_step("a"),
        tool_step("b", dependsOn=["a"]),
        tool_step("c", dependsOn=["b"], arguments={"v": "{{ steps.a.output }}"}),
    ]
    assert issues({"steps": steps}) == []


def test_open_parameter_schemas_allow_any_param() -> None:
    parameters = {"type": "object", "properties": {"a": {}}, "additionalProperties": True}
    assert (
        issues({"parameters": parameters, "steps": [tool_step("s", arguments={"x": "{{ params.b }}"})]}) == []
    )


def test_default_results_are_required_for_referenced_fields_of_skippable_steps() -> None:
    steps = [
        tool_step("maybe", condition="{{ params.go }}", defaultResults={"text": "none"}),
        tool_step("flaky", onError={"action": "continue"}),
        tool_step(
            "use",
            dependsOn=["maybe", "flaky"],
            arguments={
                "a": "{{ steps.maybe.output.text }}",
                "b": "{{ steps.maybe.output.extra }}",
                "c": "{{ steps.flaky.output.v }}",
            },
        ),
    ]
    output = {
        "properties": {"o": {"type": "string", "description": "o", "value": "{{ steps.flaky.output.w }}"}}
    }
    assert issues({"parameters": PARAMS, "steps": steps, "output": output}) == [
        "steps[0].defaultResults: needs a value for 'extra': step 'maybe' may be skipped and steps[2] ('use') "
        "uses steps.maybe.output.extra",
        "steps[1].defaultResults: needs a value for 'v': step 'flaky' may be skipped and steps[2] ('use') "
        "uses steps.flaky.output.v",
        "steps[1].defaultResults: needs a value for 'w': step 'flaky' may be skipped and the output uses steps.flaky.output.w",
    ]


def test_unreferenced_outputs_of_skippable_steps_need_no_defaults() -> None:
    steps = [tool_step("maybe", condition="{{ params.go }}"), tool_step("after", dependsOn=["maybe"])]
    assert issues({"parameters": PARAMS, "steps": steps}) == []


def test_on_error_rules() -> None:
    steps = [
        tool_step("a", onError={"action": "explode"}),
        tool_step("b", onError={"action": "retry", "retryCount": 11}),
        tool_step("c", onError={"action": "retry", "retryCount": 1, "maxRetries": 2}),
        tool_step(
            "d", onError={"action": "retry", "maxRetries": 2, "retryDelay": "500ms", "maxRetryDelay": "5s"}
        ),
    ]
    assert issues({"steps": steps}) == [
        "steps[0].onError.action: unknown value 'explode' (use abort, continue, retry)",
        "steps[1].onError.retryCount: must be at most 10",
        "steps[2].onError: give retryCount or maxRetries, not both",
    ]


def test_elicitation_rules() -> None:
    steps = [
        {"id": "a", "type": "elicitation"},
        {
            "id": "b",
            "type": "elicitation",
            "message": "ok?",
            "onDecline": "explode",
            "onCancel": {"action": "skip_remaining"},
        },
        {
            "id": "c",
            "type": "elicitation",
            "message": "ok?",
            "schema": {"type": "object", "properties": {"o": {"type": "object"}}},
        },
        {"id": "d", "type": "elicitation", "message": "ok?", "tool": "k8s/apply", "arguments": {"x": 1}},
        {
            "id": "e",
            "type": "elicitation",
            "message": "{{ params.env }}?",
            "schema": {"type": "boolean"},
            "defaultResponse": False,
        },
    ]
    assert issues({"parameters": PARAMS, "steps": steps}) == [
        "steps[0].message: is required for an elicitation step",
        "steps[1].onDecline: unknown value 'explode' (use abort, continue, skip_remaining)",
        "steps[2].schema.properties.o: MCP elicitation asks for flat forms: each property must be a string, number, integer or boolean",
        "steps[3].arguments: not allowed on an elicitation step",
        "steps[3].tool: not allowed on an elicitation step",
    ]


def for_each(**fields: Any) -> dict[str, Any]:
    return {
        "id": "each",
        "type": "forEach",
        "collection": "{{ params.items }}",
        "step": {"tool": "osv/query", "arguments": {"name": "{{ item.name }}"}},
        **fields,
    }


FOREACH_PARAMS = {"type": "object", "properties": {"items": {"type": "array"}}}


def test_for_each_rules_match_toolhive() -> None:
    assert issues({"parameters": FOREACH_PARAMS, "steps": [for_each()]}) == []
    cases = {
        "collection": (for_each(collection=None), "steps[0].collection: is required for a forEach step"),
        "step": (for_each(step=None), "steps[0].step: is required: the tool step to run for each item"),
        "tool": (
            for_each(tool="k8s/apply"),
            "steps[0].tool: a forEach step must not have 'tool' (put it on the inner 'step')",
        ),
        "inner type": (
            for_each(step={"type": "elicitation", "message": "x"}),
            "steps[0].step.type: must be 'tool' (got 'elicitation'); only tool steps run inside forEach",
        ),
        "inner tool": (for_each(step={"type": "tool"}), "steps[0].step.tool: is required for a tool step"),
        "itemVar": (
            for_each(itemVar="123bad", step={"tool": "osv/query"}),
            "steps[0].itemVar: must be an identifier (got '123bad')",
        ),
        "reserved": (
            for_each(itemVar="index", step={"tool": "osv/query"}),
            "steps[0].itemVar: 'index' is reserved; choose another name",
        ),
        "maxIterations": (for_each(maxIterations=1001), "steps[0].maxIterations: must be between 1 and 1000"),
        "maxParallel": (for_each(maxParallel=51), "steps[0].maxParallel: must be between 1 and 50"),
        "template": (for_each(collection="{{ params.items"), "steps[0].collection: template syntax error"),
    }
    for name, (step, expected) in cases.items():
        found = issues({"parameters": FOREACH_PARAMS, "steps": [step]})
        assert len(found) == 1 and found[0].startswith(expected), (name, found)


def test_for_each_item_names_are_only_visible_inside_the_inner_step() -> None:
    step = for_each(
        itemVar="pkg",
        collection="{{ pkg }}",
        step={"tool": "osv/query", "arguments": {"n": "{{ pkg.name }}-{{ index }}"}},
    )
    assert issues({"parameters": FOREACH_PARAMS, "steps": [step]}) == [
        "steps[0].collection: unknown name 'pkg' (templates see params, steps, workflow)"
    ]


def test_output_rules_match_toolhive() -> None:
    output = {
        "properties": {
            "a": {"type": "int", "description": "A", "value": "{{ steps.s.output.a }}"},
            "b": {"type": "string", "value": "x"},
            "c": {"type": "string", "description": "C"},
            "d": {
                "type": "object",
                "description": "D",
                "value": "{}",
                "properties": {"e": {"type": "string", "description": "E", "value": "e"}},
            },
            "f": {"type": "integer", "description": "F", "value": "{{ steps.s.output.f }}", "default": [1]},
            "g": {
                "type": "string",
                "description": "G",
                "properties": {"h": {"type": "string", "description": "H", "value": "h"}},
            },
        },
        "required": ["zz"],
    }
    assert issues({"steps": [tool_step("s")], "output": output}) == [
        "output.properties.a.type: unknown type 'int' (use string, integer, number, boolean, object, array)",
        "output.properties.b.description: is required (clients and models read it)",
        "output.properties.c: needs a 'value' (or, for an object, nested 'properties')",
        "output.properties.d: give either 'value' or 'properties', not both",
        "output.properties.f.default: does not fit type 'integer'",
        "output.properties.g.properties: only an object property has nested properties (type is 'string')",
        "output.required[0]: required property 'zz' is not defined in properties",
    ]
    assert issues({"steps": [tool_step("s")], "output": {"properties": {}}}) == [
        "output.properties: must define at least one property"
    ]


def test_output_nesting_is_limited() -> None:
    prop: dict[str, Any] = {"type": "string", "description": "leaf", "value": "x"}
    for _ in range(11):
        prop = {"type": "object", "description": "level", "properties": {"p": prop}}
    found = issues({"steps": [tool_step("s")], "output": {"properties": {"p": prop}}})
    assert len(found) == 1 and "nest deeper than 10 levels" in found[0]


def test_unknown_keys_are_errors_naming_the_key_meant() -> None:
    assert issues({"steps": [tool_step("a", dependson=["x"])]}) == [
        "steps[0].dependson: unknown key; did you mean 'dependsOn'?"
    ]
    assert issues({"steps": [tool_step("a", zzz=1)]}) == [
        "steps[0].zzz: unknown key (check the spelling; unknown keys are errors)"
    ]


def test_definitions_load_from_a_yaml_file_entry(tmp_path: Path) -> None:
    (tmp_path / "flows.yaml").write_text(
        "composite_tools:\n"
        "  - name: deploy\n"
        "    description: Deploy\n"
        "    steps:\n"
        "      - {id: apply, tool: k8s/apply}\n"
        "  - name: notify\n"
        "    description: Notify\n"
        "    steps:\n"
        "      - {id: send, tool: slack/send}\n"
    )
    config = parse_config(
        {"backends": BACKENDS, "composite_tools": [{"file": "flows.yaml"}]}, base_dir=tmp_path
    )
    assert config is not None and [c.name for c in config.composite_tools] == ["deploy", "notify"]


# -- cycles across composites ---------------------------------------------------------------------


def test_find_cycles_names_one_cycle_per_component() -> None:
    edges = {"a": ["b"], "b": ["c"], "c": ["a"], "d": ["d"], "e": ["a"], "f": []}
    assert find_cycles(edges) == [["a", "b", "c"], ["d"]]
    assert format_cycle(["a", "b", "c"]) == "a → b → c → a"
    assert find_cycles({"a": ["b"], "b": []}) == []


def test_find_cycles_handles_deep_graphs() -> None:
    edges = {f"n{i}": [f"n{i + 1}"] for i in range(5000)}
    edges["n5000"] = ["n0"]
    cycles = find_cycles(edges)
    assert len(cycles) == 1 and len(cycles[0]) == 5001


def test_find_composite_cycles_ignores_backend_tools() -> None:
    composites = {
        "deploy": frozenset({"k8s__apply", "verify"}),
        "verify": frozenset({"deploy", "k8s__get"}),
        "report": frozenset({"deploy"}),
    }
    assert find_composite_cycles(composites) == [["deploy", "verify"]]
    assert find_composite_cycles({"a": frozenset({"k8s__x"})}) == []


@pytest.mark.parametrize("condition", [True, None, ""])
def test_conditions_that_always_hold_do_not_make_a_step_skippable(condition: Any) -> None:
    steps = [
        tool_step("a", condition=condition),
        tool_step("b", dependsOn=["a"], arguments={"v": "{{ steps.a.output.x }}"}),
    ]
    assert issues({"steps": steps}) == []
