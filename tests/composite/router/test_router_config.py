"""Router definitions: validation reports EVERY problem, each with its path."""

from __future__ import annotations

from typing import Any

import pytest

from support.configs import backends_for, config_issues, parse_composite_def
from toolweave.composite.router.config import RouterDef
from toolweave.config import ConfigError, parse_config


def router(**overrides: Any) -> dict[str, Any]:
    definition: dict[str, Any] = {
        "name": "smart_scraper",
        "description": "Scrape any URL with the best scraper for its site.",
        "routing": "rule_based",
        "operations": [
            {
                "slug": "linkedin-scraper",
                "tool": "linkedin/scrape_profile",
                "parameter_mapping": {"url": "profile_url"},
            },
            {"slug": "generic", "tool": "firecrawl/scrape"},
        ],
        "rules": [
            {
                "condition": {
                    "type": "contains",
                    "field": "url",
                    "value": "linkedin.com",
                    "caseSensitive": False,
                },
                "operation": "linkedin-scraper",
                "priority": 1,
            }
        ],
        "default_operation": "generic",
    }
    definition.update(overrides)
    return definition


def rule(condition: dict[str, Any], operation: str = "generic", priority: int = 0) -> dict[str, Any]:
    return {"condition": condition, "operation": operation, "priority": priority}


def test_spec_example_is_valid() -> None:
    model = parse_composite_def(router())
    assert isinstance(model, RouterDef)
    assert model.kind == "router"
    assert model.required_strategy == "all"
    assert model.rules[0].condition.is_case_sensitive is False
    assert model.operations[0].parameter_mapping == {"url": "profile_url"}
    assert model.static_issues() == []


def test_kind_is_inferred_from_operations() -> None:
    assert parse_composite_def(router()).kind == "router"


def test_unknown_condition_type_message_shape() -> None:
    """SPEC §2: `composite_tools[2].rules[0].condition.type: unknown type 'regex'`."""
    bad = router(rules=[rule({"type": "regex", "field": "url", "value": "x"})])
    definitions = [
        {"name": "a", "tools": ["linkedin/scrape_profile"]},
        {"name": "b", "tools": ["linkedin/scrape_profile"]},
        bad,
    ]
    with pytest.raises(ConfigError) as caught:
        parse_config({"backends": backends_for("linkedin", "firecrawl"), "composite_tools": definitions})
    assert [str(issue) for issue in caught.value.issues] == [
        "composite_tools[2].rules[0].condition.type: unknown type 'regex'"
    ]
    assert caught.value.issues[0].path == "composite_tools[2].rules[0].condition.type"
    assert caught.value.issues[0].message == "unknown type 'regex'"


def test_nested_unknown_type_has_nested_path() -> None:
    condition = {"type": "all", "conditions": [{"type": "exists", "field": "a"}, {"type": "nope"}]}
    issues = config_issues(router(rules=[rule(condition)]))
    assert issues == ["composite_tools[0].rules[0].condition.conditions[1].type: unknown type 'nope'"]


@pytest.mark.parametrize(
    ("condition", "path", "fragment"),
    [
        ({"type": "contains", "value": "x"}, "condition.field", "needs the input field"),
        ({"type": "contains", "field": "url"}, "condition.value", "needs a string, number or boolean"),
        ({"type": "contains", "field": "url", "value": ["x"]}, "condition.value", "needs a string"),
        ({"type": "matches", "field": "url", "value": 5}, "condition.value", "regular expression"),
        ({"type": "in", "field": "url", "value": "x"}, "condition.value", "non-empty list"),
        ({"type": "in", "field": "url", "value": []}, "condition.value", "non-empty list"),
        ({"type": "in", "field": "url", "value": [{"a": 1}]}, "condition.value", "non-empty list"),
        ({"type": "gt", "field": "n", "value": "5"}, "condition.value", "needs a number"),
        ({"type": "gt", "field": "n", "value": True}, "condition.value", "needs a number"),
        ({"type": "exists", "field": "n", "value": 1}, "condition.value", "not used by a 'exists'"),
        (
            {"type": "gt", "field": "n", "value": 1, "caseSensitive": True},
            "condition.caseSensitive",
            "no effect",
        ),
        ({"type": "all", "conditions": []}, "condition.conditions", "non-empty list"),
        ({"type": "any"}, "condition.conditions", "non-empty list"),
        (
            {"type": "all", "field": "x", "conditions": [{"type": "exists", "field": "a"}]},
            "condition.field",
            "not used",
        ),
        ({"type": "not"}, "condition.condition", "needs the condition"),
        (
            {"type": "exists", "field": "a", "condition": {"type": "exists", "field": "b"}},
            "condition.condition",
            "only 'not'",
        ),
        (
            {"type": "equals", "field": "a", "value": "x", "conditions": [{"type": "exists", "field": "b"}]},
            "condition.conditions",
            "only 'all' and 'any'",
        ),
        ({"type": "equals", "field": "a..b", "value": "x"}, "condition.field", "not a field path"),
        ({"type": "equals", "field": "", "value": "x"}, "condition.field", "not a field path"),
        ({"type": "equals", "field": "a", "value": "x", "flavour": 1}, "condition.flavour", "unknown key"),
        ({"field": "a", "value": "x"}, "condition.type", "required key is missing"),
    ],
)
def test_condition_shape_problems(condition: dict[str, Any], path: str, fragment: str) -> None:
    issues = config_issues(router(rules=[rule(condition)]))
    assert any(
        issue.startswith(f"composite_tools[0].rules[0].{path}:") and fragment in issue for issue in issues
    ), issues


def test_every_problem_is_reported_at_once() -> None:
    definition = router(
        operations=[
            {"slug": "li", "tool": "linkedin/scrape_profile"},
            {
                "slug": "li",
                "tool": "firecrawl/scrape",
                "parameter_mapping": {"a": "x", "b": "x"},
                "arguments": {"x": 1},
            },
        ],
        rules=[
            rule({"type": "matches", "field": "url", "value": "(?<=a)b"}, "li"),
            rule({"type": "contains", "field": "url", "value": "x"}, "nope"),
            rule({"type": "any", "conditions": [{"type": "matches", "field": "u", "value": "a("}]}, "li"),
        ],
        default_operation="missing",
        success_template="{{ unclosed",
        input_schema={"type": "array"},
    )
    issues = config_issues(definition)
    expected_paths = [
        "composite_tools[0].operations[1].slug",
        "composite_tools[0].operations[1].parameter_mapping.b",
        "composite_tools[0].operations[1].arguments.x",
        "composite_tools[0].rules[1].operation",
        "composite_tools[0].default_operation",
        "composite_tools[0].rules[0].condition.value",
        "composite_tools[0].rules[2].condition.conditions[0].value",
        "composite_tools[0].success_template",
        "composite_tools[0].input_schema",
    ]
    assert [issue.split(": ", 1)[0] for issue in issues] == expected_paths
    joined = "\n".join(issues)
    assert "duplicate slug 'li' (also operations[0])" in joined
    assert "unknown operation 'nope' (operations: li)" in joined
    assert "unknown operation 'missing'" in joined
    assert "invalid RE2 pattern: invalid perl operator: (?<=" in joined
    assert "invalid RE2 pattern: missing ): a(" in joined
    assert "'b' and 'a' both map to 'x'" in joined
    assert "'x' is both fixed here and mapped from 'a'" in joined


def test_structural_problems_of_several_rules_are_all_reported() -> None:
    definition = router(
        rules=[
            rule({"type": "regex", "field": "url", "value": "x"}),
            rule({"type": "gt", "field": "n", "value": "x"}),
            rule({"type": "not"}),
        ]
    )
    issues = config_issues(definition)
    assert [issue.split(": ", 1)[0] for issue in issues] == [
        "composite_tools[0].rules[0].condition.type",
        "composite_tools[0].rules[1].condition.value",
        "composite_tools[0].rules[2].condition.condition",
    ]


def test_empty_operations() -> None:
    issues = config_issues(router(operations=[], rules=[], default_operation=None), backends=[])
    assert "composite_tools[0].operations: a router needs at least one operation" in issues


def test_rule_based_needs_rules_or_default() -> None:
    issues = config_issues(router(rules=[], default_operation=None))
    assert issues == [
        "composite_tools[0].rules: rule_based routing needs at least one rule or a default_operation"
    ]
    assert config_issues(router(rules=[])) == []


def test_agent_driven_rejects_rules_and_default() -> None:
    issues = config_issues(router(routing="agent_driven"))
    assert [issue.split(": ", 1)[0] for issue in issues] == [
        "composite_tools[0].rules",
        "composite_tools[0].default_operation",
    ]
    assert config_issues(router(routing="agent_driven", rules=[], default_operation=None)) == []


def test_agent_driven_mapping_cannot_claim_the_selector() -> None:
    operations = [{"slug": "a", "tool": "firecrawl/scrape", "parameter_mapping": {"operation": "mode"}}]
    issues = config_issues(
        router(routing="agent_driven", operations=operations, rules=[], default_operation=None)
    )
    assert len(issues) == 1
    assert issues[0].startswith("composite_tools[0].operations[0].parameter_mapping.operation:")
    assert "selector" in issues[0]


@pytest.mark.parametrize(
    ("operation", "path"),
    [
        ({"slug": "bad slug", "tool": "firecrawl/scrape"}, "operations[0].slug"),
        ({"slug": "", "tool": "firecrawl/scrape"}, "operations[0].slug"),
        (
            {"slug": "ok", "tool": "firecrawl/scrape", "parameter_mapping": {"": "x"}},
            "operations[0].parameter_mapping",
        ),
        (
            {"slug": "ok", "tool": "firecrawl/scrape", "parameter_mapping": {"x": 5}},
            "operations[0].parameter_mapping.x",
        ),
        ({"slug": "ok", "tool": "firecrawl/scrape", "extra": 1}, "operations[0].extra"),
        ({"slug": "ok"}, "operations[0].tool"),
    ],
)
def test_operation_shape_problems(operation: dict[str, Any], path: str) -> None:
    issues = config_issues(
        router(operations=[operation], rules=[], default_operation="ok"), backends=["firecrawl"]
    )
    assert any(issue.startswith(f"composite_tools[0].{path}:") for issue in issues), issues


@pytest.mark.parametrize(
    ("overrides", "path"),
    [
        ({"routing": "llm"}, "routing"),
        ({"required_strategy": "some"}, "required_strategy"),
        (
            {
                "rules": [
                    {
                        "condition": {"type": "exists", "field": "a"},
                        "operation": "generic",
                        "priority": "high",
                    }
                ]
            },
            "rules[0].priority",
        ),
        ({"rules": [{"condition": "url has linkedin", "operation": "generic"}]}, "rules[0].condition"),
        ({"error_template": "{% if %}"}, "error_template"),
    ],
)
def test_router_field_problems(overrides: dict[str, Any], path: str) -> None:
    issues = config_issues(router(**overrides))
    assert any(issue.startswith(f"composite_tools[0].{path}:") for issue in issues), issues


def test_static_issues_on_a_model_built_directly() -> None:
    model = RouterDef.model_validate(
        {
            "name": "r",
            "operations": [{"slug": "a", "tool": "b/t"}],
            "rules": [{"condition": {"type": "matches", "field": "x", "value": "(a"}, "operation": "zz"}],
        }
    )
    issues = model.static_issues()
    assert [path for path, _ in issues] == ["rules[0].operation", "rules[0].condition.value"]


def test_caseSensitive_true_pattern_is_checked_with_the_same_options() -> None:
    condition = {"type": "matches", "field": "u", "value": "[z-a]", "caseSensitive": True}
    issues = config_issues(router(rules=[rule(condition)]))
    assert len(issues) == 1 and "invalid RE2 pattern" in issues[0]
