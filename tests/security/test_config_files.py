"""Finding 9: a hostile or broken config file ends in a config problem, never a traceback or a hang.

As found: YAML billion-laughs ran past 60 s at 600 MB; a recursive alias and 50,000-deep YAML/TOML
ended in `RecursionError` tracebacks; a 5,000-digit TOML integer in a `ValueError` traceback;
`{file: /dev/zero}` read until `MemoryError`. Each is now a `ConfigError` naming the file, with the
memory peak measured; and a hypothesis fuzz feeds the loader arbitrary documents.
"""

from __future__ import annotations

import contextlib
import string
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toolweave.config import ConfigError, load_config

MB = 1 << 20

BILLION_LAUGHS = "\n".join(
    ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    + [f"{chr(98 + i)}: &{chr(98 + i)} [" + ",".join([f"*{chr(97 + i)}"] * 9) + "]" for i in range(8)]
    + ["backends: *i"]
)


def refused(tmp_path: Path, name: str, text: str) -> str:
    """The loader's message for a config file holding `text`; fails if it loads or raises otherwise."""
    file = tmp_path / name
    file.write_text(text)
    tracemalloc.start()
    try:
        with pytest.raises(ConfigError) as raised:
            load_config(file)
        _current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 64 * MB, f"{peak / MB:.0f} MB allocated before the refusal"
    return str(raised.value)


def test_yaml_billion_laughs_is_refused_without_expanding(tmp_path: Path) -> None:
    message = refused(tmp_path, "c.yaml", BILLION_LAUGHS)
    assert "expands to more than" in message


def test_a_recursive_yaml_alias_is_refused(tmp_path: Path) -> None:
    message = refused(tmp_path, "c.yaml", "backends: &a [*a]\n")
    assert "recursive" in message and "*a" in message


@pytest.mark.parametrize(
    ("name", "text", "says"),
    [
        # YAML: refused as the composer enters the 101st level, before its recursion nears Python's
        # limit (a RecursionError there took 10-15 s of CPU under tracemalloc)
        ("c.yaml", "backends: " + "[" * 50_000 + "]" * 50_000 + "\n", "nested more than 100 levels"),
        ("c.yaml", "x: " + "{a: " * 5_000 + "1" + "}" * 5_000 + "\n", "nested more than 100 levels"),
        ("c.yaml", "- " * 5_000 + "1\n", "nested more than 100 levels"),
        ("c.toml", "x = " + "[" * 50_000 + "]" * 50_000 + "\n", "nested"),
        ("c.toml", "x = " + "[" * 150 + "]" * 150 + "\n", "nested more than 100 levels"),
    ],
    ids=["yaml 50k lists", "yaml 5k mappings", "yaml 5k block lists", "toml 50k arrays", "toml 150 arrays"],
)
def test_deep_nesting_is_a_problem_not_a_recursion_error(
    tmp_path: Path, name: str, text: str, says: str
) -> None:
    assert says in refused(tmp_path, name, text)


def test_a_huge_toml_integer_is_a_problem(tmp_path: Path) -> None:
    message = refused(tmp_path, "c.toml", "[gateway]\nport = " + "9" * 5_000 + "\n")
    assert "invalid TOML" in message and "c.toml" in message


def test_a_composite_file_that_is_a_device_or_too_big_is_a_problem(tmp_path: Path) -> None:
    message = refused(tmp_path, "c.yaml", "composite_tools:\n  - file: /dev/zero\n")
    assert "/dev/zero" in message and "not a regular file" in message
    big = tmp_path / "big.yaml"
    with big.open("wb") as handle:
        handle.truncate(11 * MB)  # sparse: 11 MiB of zeros without writing them
    message = refused(tmp_path, "c2.yaml", f"composite_tools:\n  - file: {big}\n")
    assert "larger than" in message


def test_a_config_that_is_a_device_is_a_problem(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not a regular file"):
        load_config(Path("/dev/zero"))


def test_ordinary_aliases_still_work(tmp_path: Path) -> None:
    file = tmp_path / "c.yaml"
    file.write_text(
        "x-env: &env {A: '1'}\n"
        "backends:\n"
        "  - {name: one, command: echo, env: *env}\n"
        "  - {name: two, command: echo, env: *env}\n"
    )
    with pytest.raises(ConfigError, match="x-env"):  # an unknown top-level key, reported as usual
        load_config(file)
    file.write_text("backends:\n  - &b {name: one, command: echo}\n  - {name: two, command: echo}\n")
    assert [b.name for b in load_config(file).backends] == ["one", "two"]


# -- fuzz -----------------------------------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4)
    ),
    max_leaves=30,
)
sections = st.dictionaries(
    st.sampled_from(["gateway", "backends", "composite_tools", "policy", "auth", "limits", "search", "x"]),
    json_values,
    max_size=4,
)
yaml_bits = st.lists(
    st.sampled_from(
        [
            "a: ",
            "&x ",
            "*x ",
            "[",
            "]",
            "{",
            "}",
            "- ",
            "\n",
            "  ",
            "'",
            '"',
            "!!str ",
            "1",
            "${A}",
            ":",
            ",",
            "?",
        ]
    )
    | st.text(alphabet=string.printable, max_size=8),
    max_size=40,
).map("".join)


def _loads_or_refuses(file: Path) -> None:
    with contextlib.suppress(ConfigError):
        load_config(file)


SUPPRESSED = [HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
"""`too_slow` times the generation of inputs: on a loaded machine one draw took 30 s (a full run of
tests/security beside five others) and failed the test on the clock, not on anything it checks."""


@settings(max_examples=100, deadline=None, suppress_health_check=SUPPRESSED)
@given(document=sections)
def test_fuzz_any_structured_document_is_a_config_or_a_clean_error(
    tmp_path: Path, document: dict[str, Any]
) -> None:
    (tmp_path / "f.yaml").write_text(yaml.safe_dump(document))
    _loads_or_refuses(tmp_path / "f.yaml")


@settings(max_examples=150, deadline=None, suppress_health_check=SUPPRESSED)
@given(text=yaml_bits, suffix=st.sampled_from([".yaml", ".toml"]))
def test_fuzz_any_text_is_a_config_or_a_clean_error(tmp_path: Path, text: str, suffix: str) -> None:
    file = tmp_path / f"f{suffix}"
    file.write_text(text)
    _loads_or_refuses(file)
