"""Argument validation against input schemas, secret redaction, and name patterns."""

from __future__ import annotations

import pytest

from toolweave.config.patterns import PatternSet, pattern_problem
from toolweave.schemas.validate import ArgumentValidator
from toolweave.secrets import redact_arguments as redact
from toolweave.secrets import secret_fields

SCHEMA = {
    "type": "object",
    "properties": {
        "a": {"type": "integer"},
        "b": {"type": "integer", "minimum": 0},
        "mode": {"enum": ["fast", "slow"]},
        "nested": {"type": "object", "properties": {"x": {"type": "string"}}, "required": ["x"]},
        "password": {"type": "string", "format": "password", "minLength": 8},
    },
    "required": ["a", "b"],
    "additionalProperties": False,
}


def test_valid_arguments_have_no_problems() -> None:
    assert ArgumentValidator(SCHEMA).problems({"a": 1, "b": 2, "mode": "fast", "nested": {"x": "y"}}) == []


def test_every_problem_names_its_field() -> None:
    problems = ArgumentValidator(SCHEMA).problems(
        {"a": "one", "b": -1, "mode": "medium", "nested": {}, "extra": True}
    )
    text = "\n".join(problems)
    assert "missing required argument 'nested.x'" in text
    assert "argument 'a': 'one' is not of type 'integer'" in text
    assert "argument 'b': -1 is less than the minimum of 0" in text
    assert "argument 'mode'" in text and "'medium' is not one of" in text
    assert "unexpected argument(s) at '(root)'" in text and "'extra'" in text
    assert len(problems) == 5


def test_missing_required_arguments() -> None:
    assert ArgumentValidator(SCHEMA).problems({"a": 1}) == ["missing required argument 'b'"]


def test_secret_values_never_appear_in_messages() -> None:
    (problem,) = ArgumentValidator(SCHEMA).problems({"a": 1, "b": 1, "password": "hunter2"})
    assert "hunter2" not in problem
    assert problem == "argument 'password' is invalid (minLength 8 failed)"


def test_arguments_that_are_not_an_object() -> None:
    (problem,) = ArgumentValidator(SCHEMA).problems([1, 2])
    assert "is not of type 'object'" in problem


def test_a_broken_schema_does_not_make_a_tool_uncallable() -> None:
    assert (
        ArgumentValidator({"type": "object", "properties": {"a": {"type": "nonsense"}}}).problems({"a": 1})
        == []
    )
    assert ArgumentValidator(None).problems({"anything": 1}) == []


def test_secret_fields_and_redaction() -> None:
    secrets = secret_fields(
        {
            "properties": {
                "password": {"format": "password"},
                "token": {"writeOnly": True},
                "user": {"type": "string"},
            }
        }
    )
    assert secrets == frozenset({"password", "token"})
    assert redact({"user": "ann", "password": "p", "token": "t"}, secrets) == {
        "user": "ann",
        "password": "[redacted]",
        "token": "[redacted]",
    }
    assert redact({"user": "ann"}, frozenset()) == {"user": "ann"}
    assert secret_fields(None) == frozenset()


@pytest.mark.parametrize(
    ("patterns", "name", "matches"),
    [
        (["delete_*"], "delete_repo", True),
        (["delete_*"], "undelete_repo", False),  # globs match the whole name
        (["*_repo"], "delete_repo", True),
        (["get_?ile"], "get_file", True),
        (["[abc]*"], "bfoo", True),
        (["re:get_.*"], "get_file", True),
        (["re:get"], "get_file", False),  # regexes too
        (["re:(?i)GET_FILE"], "get_file", True),
        (["a*", "re:b.*"], "bar", True),
        ([], "anything", False),
    ],
)
def test_pattern_sets(patterns: list[str], name: str, matches: bool) -> None:
    assert PatternSet(patterns).matches(name) is matches
    assert bool(PatternSet(patterns)) is bool(patterns)


def test_pattern_problems() -> None:
    assert pattern_problem("delete_*") is None and pattern_problem("re:^a+$") is None
    assert pattern_problem("re:(") == "invalid regular expression 're:(': missing ): ("
    assert "invalid perl operator" in (pattern_problem("re:(?=a)") or "")  # RE2: no lookaround
    assert pattern_problem("") == "a pattern must be a non-empty string"
