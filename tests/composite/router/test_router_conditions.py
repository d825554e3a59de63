"""Routing conditions: every type, combinators, case, dotted paths, missing fields, string forms."""

from __future__ import annotations

from typing import Any

import pytest

from toolweave.composite.router.conditions import (
    compile_condition,
    number_form,
    referenced_fields,
    string_form,
)
from toolweave.composite.router.config import Condition


def matcher(spec: dict[str, Any]):
    return compile_condition(Condition.model_validate(spec))


def matches(spec: dict[str, Any], arguments: dict[str, Any]) -> bool:
    return matcher(spec).match(arguments) is not None


# -- string conditions ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "value", "text", "expected"),
    [
        ("contains", "linkedin.com", "https://www.linkedin.com/in/x", True),
        ("contains", "linkedin.com", "https://example.com", False),
        ("equals", "reddit.com", "reddit.com", True),
        ("equals", "reddit.com", "www.reddit.com", False),
        ("starts_with", "https://", "https://a", True),
        ("starts_with", "https://", "http://a", False),
        ("ends_with", ".pdf", "report.pdf", True),
        ("ends_with", ".pdf", "report.pdf.html", False),
        ("matches", r"^https://www\.yelp\.com/", "https://www.yelp.com/biz/x", True),
        ("matches", r"^https://www\.yelp\.com/", "https://yelp.com/biz/x", False),
        ("matches", r"\d{3}", "abc123", True),
    ],
)
def test_string_condition_types(kind: str, value: str, text: str, expected: bool) -> None:
    assert matches({"type": kind, "field": "url", "value": value}, {"url": text}) is expected


@pytest.mark.parametrize("kind", ["contains", "equals", "starts_with", "ends_with", "matches"])
def test_case_insensitive_by_default(kind: str) -> None:
    assert matches({"type": kind, "field": "q", "value": "LinkedIn"}, {"q": "linkedin"})


@pytest.mark.parametrize("kind", ["contains", "equals", "starts_with", "ends_with", "matches"])
def test_case_sensitive_when_asked(kind: str) -> None:
    spec = {"type": kind, "field": "q", "value": "LinkedIn", "caseSensitive": True}
    assert not matches(spec, {"q": "linkedin"})
    assert matches(spec, {"q": "LinkedIn"})


def test_case_sensitive_also_accepts_snake_case_key() -> None:
    spec = {"type": "equals", "field": "q", "value": "A", "case_sensitive": True}
    assert not matches(spec, {"q": "a"})


def test_case_folding_is_unicode_aware() -> None:
    assert matches({"type": "equals", "field": "q", "value": "STRASSE"}, {"q": "straße"})


def test_matches_is_an_unanchored_search() -> None:
    assert matches({"type": "matches", "field": "u", "value": "yelp"}, {"u": "https://www.yelp.com"})


def test_catastrophic_backtracking_pattern_finishes() -> None:
    """RE2 is linear time: this input hangs a backtracking engine for ages."""
    evil = "a" * 50000 + "!"
    assert not matches({"type": "matches", "field": "s", "value": "(a+)+$"}, {"s": evil})
    assert matches({"type": "matches", "field": "s", "value": "(a+)+!$"}, {"s": evil})


# -- string forms ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "form"),
    [
        ("x", "x"),
        (True, "true"),
        (False, "false"),
        (5, "5"),
        (-3, "-3"),
        (2.0, "2"),
        (2.5, "2.5"),
        (None, None),
        ({"a": 1}, None),
        ([1], None),
    ],
)
def test_string_form(value: Any, form: str | None) -> None:
    assert string_form(value) == form


def test_numbers_and_booleans_compare_as_strings() -> None:
    assert matches({"type": "equals", "field": "n", "value": "5"}, {"n": 5})
    assert matches({"type": "equals", "field": "n", "value": 5}, {"n": "5"})
    assert matches({"type": "equals", "field": "n", "value": 2}, {"n": 2.0})
    assert matches({"type": "equals", "field": "flag", "value": "true"}, {"flag": True})
    assert matches({"type": "equals", "field": "flag", "value": True}, {"flag": "TRUE"})
    assert not matches(
        {"type": "equals", "field": "flag", "value": "True", "caseSensitive": True}, {"flag": True}
    )
    assert matches({"type": "starts_with", "field": "n", "value": "12"}, {"n": 12345})


def test_objects_and_lists_never_match_string_conditions() -> None:
    assert not matches({"type": "contains", "field": "x", "value": "a"}, {"x": ["a"]})
    assert not matches({"type": "contains", "field": "x", "value": "a"}, {"x": {"a": 1}})


# -- exists, in, comparisons ------------------------------------------------------------


def test_exists() -> None:
    spec = {"type": "exists", "field": "token"}
    assert matches(spec, {"token": ""})
    assert matches(spec, {"token": 0})
    assert not matches(spec, {})
    assert not matches(spec, {"token": None})


def test_in() -> None:
    spec = {"type": "in", "field": "site", "value": ["reddit", "yelp", 3, True]}
    assert matches(spec, {"site": "Reddit"})
    assert matches(spec, {"site": 3})
    assert matches(spec, {"site": "true"})
    assert not matches(spec, {"site": "linkedin"})
    assert not matches(spec, {})


def test_in_case_sensitive() -> None:
    spec = {"type": "in", "field": "site", "value": ["Reddit"], "caseSensitive": True}
    assert not matches(spec, {"site": "reddit"})
    assert matches(spec, {"site": "Reddit"})


@pytest.mark.parametrize(
    ("kind", "bound", "value", "expected"),
    [
        ("gt", 10, 11, True),
        ("gt", 10, 10, False),
        ("gte", 10, 10, True),
        ("gte", 10, 9.5, False),
        ("lt", 10, 9, True),
        ("lt", 10, 10, False),
        ("lte", 10, 10, True),
        ("lte", 1.5, 1.6, False),
        ("gt", 10, "11", True),
        ("gt", 10, " 12.5 ", True),
        ("gt", 10, "eleven", False),
        ("gt", 0, True, False),
        ("gt", 0, float("nan"), False),
        ("lt", 0, None, False),
        ("lt", 0, [1], False),
    ],
)
def test_comparisons(kind: str, bound: float, value: Any, expected: bool) -> None:
    assert matches({"type": kind, "field": "n", "value": bound}, {"n": value}) is expected


def test_number_form() -> None:
    assert number_form("7") == 7
    assert number_form("7.5") == 7.5
    assert number_form(False) is None
    assert number_form("nan") is None
    assert number_form({"a": 1}) is None


# -- fields ---------------------------------------------------------------------------


def test_dotted_paths() -> None:
    spec = {"type": "contains", "field": "target.url", "value": "linkedin"}
    assert matches(spec, {"target": {"url": "https://linkedin.com"}})
    assert not matches(spec, {"target": {"href": "https://linkedin.com"}})
    assert not matches(spec, {"target": "https://linkedin.com"})
    assert not matches(spec, {})


def test_dotted_path_indexes_lists() -> None:
    spec = {"type": "equals", "field": "urls.1", "value": "b"}
    assert matches(spec, {"urls": ["a", "b"]})
    assert not matches(spec, {"urls": ["a"]})


def test_literal_dotted_key_wins() -> None:
    spec = {"type": "equals", "field": "a.b", "value": "literal"}
    assert matches(spec, {"a.b": "literal", "a": {"b": "nested"}})
    assert matches({"type": "equals", "field": "a.b", "value": "nested"}, {"a": {"b": "nested"}})


@pytest.mark.parametrize("kind", ["contains", "equals", "matches", "starts_with", "ends_with", "in", "gt"])
def test_missing_field_never_matches(kind: str) -> None:
    value: Any = ["x"] if kind == "in" else (1 if kind == "gt" else "")
    spec = {"type": kind, "field": "absent", "value": value}
    assert not matches(spec, {"other": "x"})
    assert not matches(spec, {"absent": None})


# -- combinators and reasons ------------------------------------------------------------


def test_all_any_not() -> None:
    linkedin = {"type": "contains", "field": "url", "value": "linkedin.com"}
    profile = {"type": "contains", "field": "url", "value": "/in/"}
    both = {"type": "all", "conditions": [linkedin, profile]}
    either = {"type": "any", "conditions": [linkedin, profile]}
    negated = {"type": "not", "condition": linkedin}
    assert matches(both, {"url": "https://linkedin.com/in/x"})
    assert not matches(both, {"url": "https://linkedin.com/company/x"})
    assert matches(either, {"url": "https://example.com/in/x"})
    assert not matches(either, {"url": "https://example.com"})
    assert matches(negated, {"url": "https://example.com"})
    assert not matches(negated, {"url": "https://linkedin.com"})


def test_not_of_a_missing_field_matches() -> None:
    assert matches({"type": "not", "condition": {"type": "equals", "field": "x", "value": "a"}}, {})


def test_reasons_describe_the_match() -> None:
    linkedin = {"type": "contains", "field": "url", "value": "linkedin.com"}
    assert matcher(linkedin).match({"url": "https://linkedin.com"}) == "url contains 'linkedin.com'"
    either = matcher(
        {"type": "any", "conditions": [{"type": "equals", "field": "a", "value": "1"}, linkedin]}
    )
    assert either.match({"url": "https://linkedin.com"}) == "url contains 'linkedin.com'"
    assert either.description == "a equals '1' or url contains 'linkedin.com'"
    nested = matcher(
        {
            "type": "all",
            "conditions": [
                {
                    "type": "any",
                    "conditions": [{"type": "exists", "field": "a"}, {"type": "exists", "field": "b"}],
                },
                {"type": "not", "condition": {"type": "gte", "field": "n", "value": 3}},
            ],
        }
    )
    assert nested.match({"a": 1, "n": 1}) == "(a exists or b exists) and not (n >= 3)"
    assert matcher({"type": "in", "field": "s", "value": ["x", 2]}).description == "s in ['x', '2']"
    assert matcher({"type": "starts_with", "field": "s", "value": "ab"}).description == "s starts with 'ab'"
    assert matcher({"type": "matches", "field": "s", "value": r"^a\.b"}).description == r"s matches '^a\.b'"


def test_referenced_fields() -> None:
    condition = Condition.model_validate(
        {
            "type": "all",
            "conditions": [
                {"type": "exists", "field": "a.b"},
                {"type": "not", "condition": {"type": "equals", "field": "c", "value": 1}},
            ],
        }
    )
    assert referenced_fields(condition) == ["a.b", "c"]
