"""A run's page: its steps as a timeline, drawn server-side as SVG bars.

Each bar starts where its step started (milliseconds after the run started) and is
as long as the step took, so parallel steps overlap and a step waiting for another
starts after it. A record without start times (written before they were kept, or
steps that never started) falls back to bars sharing one origin, comparing durations.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Any

import orjson

from toolweave.runs import RunRecord, StepRecord, StepStatus

WIDTH = 440
"""The whole timeline (or the longest bar, without start times), in SVG units: with the names
before it and the labels after it, it fits the 820-unit picture."""
MIN_BAR = 2.0
SUMMARY_CHARS = 80
"""A step's output is summed up in its first line cut to this, the whole of it one click away."""


ENDED_WHILE_RUNNING: dict[str, StepStatus] = {
    "interrupted": "interrupted",
    "cancelled": "cancelled",
    "timed_out": "timed_out",
}
"""A step still marked `running` in a run that ended so: what became of it."""


def settled_steps(run: RunRecord) -> list[StepRecord]:
    """The run's steps as they ended: in a run that is no longer running, a step still marked
    `running` (checkpointed as it began, never finished) ended with the run. It is shown so, and as
    long as it ran: from its start to the run's end (`latency_ms`, which an interrupted run keeps
    until its gateway stopped), not as a zero-length step still going. In a run still going, a
    running step is as long as it has run so far."""
    ended: StepStatus | None = ENDED_WHILE_RUNNING.get(run.status)
    if run.status == "running":  # still going: so far
        ended, until = "running", (time.time() - run.started_at) * 1000
    elif ended is None:
        return run.steps
    else:
        until = run.latency_ms
    settled = []
    for step in run.steps:
        if step.status == "running":
            ran = until - (step.start_ms or 0.0) if until > 0 else 0.0
            step = replace(step, status=ended, latency_ms=round(max(step.latency_ms, ran), 3))
        settled.append(step)
    return settled


@dataclass(frozen=True, slots=True)
class StepBar:
    id: str
    status: str
    attempts: int
    latency_ms: float
    start_ms: float | None
    x: float
    """Offset of the bar from the timeline's origin, in SVG units."""
    width: float
    y: int
    error: str | None


@dataclass(frozen=True, slots=True)
class Timeline:
    bars: list[StepBar]
    by_start: bool
    """True: bars are placed by start time; False: durations only (no start times recorded)."""
    span_ms: float


def timeline(steps: list[StepRecord]) -> Timeline:
    started = [step for step in steps if step.start_ms is not None]
    by_start = bool(started)
    if by_start:
        span = max((step.start_ms or 0.0) + step.latency_ms for step in started) or 1.0
    else:
        span = max((step.latency_ms for step in steps), default=0.0) or 1.0
    scale = WIDTH / span
    bars = []
    for index, step in enumerate(steps):
        x = (step.start_ms or 0.0) * scale if by_start else 0.0
        bars.append(
            StepBar(
                id=step.id,
                status=step.status,
                attempts=step.attempts,
                latency_ms=step.latency_ms,
                start_ms=step.start_ms,
                x=round(x, 1),
                width=round(max(MIN_BAR, step.latency_ms * scale), 1),
                y=index * 26,
                error=step.error,
            )
        )
    return Timeline(bars=bars, by_start=by_start, span_ms=span)


def step_outputs(steps: list[StepRecord]) -> dict[str, tuple[str, str]]:
    """Step id → (a one-line summary, the whole output) of every step that kept one: a fan-out's
    targets their answers (structured, else text), a workflow's steps their outputs."""
    found = {}
    for step in steps:
        if step.output is None or step.output in ({}, ""):
            continue
        whole = step.output if isinstance(step.output, str) else _json(step.output)
        line = whole.strip().splitlines()[0] if whole.strip() else ""
        if isinstance(step.output, dict | list):
            line = orjson.dumps(step.output).decode()
        found[step.id] = (line if len(line) <= SUMMARY_CHARS else line[: SUMMARY_CHARS - 1] + "…", whole)
    return found


def _json(value: Any) -> str:
    return orjson.dumps(
        value, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS
    ).decode()
