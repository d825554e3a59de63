"""A run's page: its steps as a timeline, drawn server-side as SVG bars.

Each bar starts where its step started (milliseconds after the run started) and is
as long as the step took, so parallel steps overlap and a step waiting for another
starts after it. A record without start times (written before they were kept, or
steps that never started) falls back to bars sharing one origin, comparing durations.
"""

from __future__ import annotations

from dataclasses import dataclass

from toolweave.runs import StepRecord

WIDTH = 440
"""The whole timeline (or the longest bar, without start times), in SVG units: with the names
before it and the labels after it, it fits the 820-unit picture."""
MIN_BAR = 2.0


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
