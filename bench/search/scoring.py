"""Recall@k and MRR of a ranking function over a query set."""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from bench.search.corpus import Query

Ranker = Callable[[str], Sequence[str]]
"""A query -> exposed names, best first (at least 10)."""


@dataclass
class Scores:
    count: int
    recall: dict[int, float]
    mrr: float
    hard_recall5: float
    misses: list[tuple[str, list[str]]]

    def row(self) -> dict[str, float]:
        return {
            "R@1": self.recall[1],
            "R@5": self.recall[5],
            "R@10": self.recall[10],
            "MRR": self.mrr,
            "hard R@5": self.hard_recall5,
        }


def score(queries: Sequence[Query], rank: Ranker) -> Scores:
    hits = {1: 0, 5: 0, 10: 0}
    reciprocal = []
    hard_hits = hard_total = 0
    misses = []
    for query in queries:
        names = list(rank(query.text))[:10]
        position = next((i for i, name in enumerate(names) if name in query.expected), None)
        for k in hits:
            hits[k] += position is not None and position < k
        reciprocal.append(0.0 if position is None else 1 / (position + 1))
        if query.hard:
            hard_total += 1
            hard_hits += position is not None and position < 5
        if position is None or position >= 5:
            misses.append((query.text, names[:3]))
    n = len(queries)
    return Scores(
        count=n,
        recall={k: v / n for k, v in hits.items()},
        mrr=statistics.fmean(reciprocal),
        hard_recall5=hard_hits / hard_total if hard_total else 0.0,
        misses=misses,
    )
