"""A run's page: its steps as a timeline, drawn server-side as SVG bars.

Step records keep each step's duration, not its start, so the bars share one origin
and their lengths compare durations; the order is the order the steps were recorded in.
"""

from __future__ import annotations

from dataclasses import dataclass

from toolweave.runs import StepRecord

WIDTH = 560
"""The longest bar, in SVG units."""


@dataclass(frozen=True, slots=True)
class StepBar:
    id: str
    status: str
    attempts: int
    latency_ms: float
    width: float
    y: int
    error: str | None


def timeline(steps: list[StepRecord]) -> list[StepBar]:
    longest = max((step.latency_ms for step in steps), default=0.0) or 1.0
    return [
        StepBar(
            id=step.id,
            status=step.status,
            attempts=step.attempts,
            latency_ms=step.latency_ms,
            width=max(2.0, WIDTH * step.latency_ms / longest),
            y=index * 26,
            error=step.error,
        )
        for index, step in enumerate(steps)
    ]
