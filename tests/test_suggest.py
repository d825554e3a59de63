"""`toolweave.suggest`: the one "did you mean" every unknown-name message uses."""

from __future__ import annotations

from toolweave.suggest import closest, did_you_mean


def test_the_closest_names_containing_ones_first() -> None:
    names = ["py__greet", "py__multiply", "gh__search", "greeter"]
    assert closest("greet", names) == ["py__greet", "greeter"]
    assert closest("gh__serach", names) == ["gh__search"]
    assert closest("launch_rockets", names) == []
    assert "py__greet" not in closest("py__greet", names)  # the name itself is not a suggestion


def test_the_hint_reads_as_the_end_of_a_message() -> None:
    assert did_you_mean("descripton", ["description", "name"]) == "; did you mean 'description'?"
    assert did_you_mean("zzz", ["description"]) == ""


def test_a_very_long_name_is_not_compared() -> None:
    # a user controls the name (a tools/call, a REST path): its cost must not grow with it
    assert closest("g" * 201, ["g" * 200]) == []
    assert closest("g" * 200, ["g" * 200 + "x"]) == ["g" * 200 + "x"]
