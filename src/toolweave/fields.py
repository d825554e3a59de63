"""Field types every definition model shares (the config file's and each composite kind's):
strictness, durations, names, tool references.

Every model forbids unknown keys, because a typo in a config file must be an
error with a path, never a silently ignored setting.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, PlainSerializer

BACKEND_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,31}$")
EXPOSED_NAME_RE = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")

_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)")
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


class StrictModel(BaseModel):
    """Base of every config model: unknown keys are errors, models are immutable."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


def parse_duration(value: Any) -> float:
    """Turn `30s`, `500ms`, `5m`, `1h30m` or a number of seconds into seconds."""
    if isinstance(value, bool):
        raise ValueError("a duration is a number of seconds or a string like '30s', '500ms', '5m'")
    if isinstance(value, int | float):
        seconds = float(value)
    elif isinstance(value, str):
        text = value.strip().replace(" ", "")
        if not text:
            raise ValueError("empty duration")
        try:
            seconds = float(text)
        except ValueError:
            pos, seconds = 0, 0.0
            for match in _DURATION_PART.finditer(text):
                if match.start() != pos:
                    break
                seconds += float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
                pos = match.end()
            if pos != len(text) or pos == 0:
                raise ValueError(
                    f"invalid duration {value!r}: use a number of seconds or e.g. '30s', '500ms', '5m', '1h'"
                ) from None
    else:
        raise ValueError("a duration is a number of seconds or a string like '30s', '500ms', '5m'")
    if seconds < 0:
        raise ValueError(f"a duration cannot be negative ({value!r})")
    return seconds


def format_duration(seconds: float) -> str:
    if seconds and seconds < 1:
        return f"{round(seconds * 1000)}ms"
    return f"{seconds:g}s"


Duration = Annotated[
    float, BeforeValidator(parse_duration), PlainSerializer(format_duration, return_type=str)
]
"""Seconds as a float; accepts `30s`, `500ms`, `5m`, `1h` or plain numbers in config."""


def split_tool_ref(ref: str) -> tuple[str, str] | None:
    """Split `backend/tool` or `backend.tool` into its parts; None when it has neither form.

    A `/` wins over a `.` so that tool names containing dots stay intact
    (`docs/search.v2` is backend `docs`, tool `search.v2`).
    """
    for sep in ("/", "."):
        backend, found, tool = ref.partition(sep)
        if found and backend and tool:
            return backend, tool
    return None
