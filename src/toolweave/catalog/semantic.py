"""Meaning-based ranking for `find_tools`, fused with the lexical one (`[search.embeddings]`).

Some tasks share no word with the tool that does them ("how long from our offices to the airport"
is a distance-matrix tool). An embeddings model places both near each other; any OpenAI-compatible
`/v1/embeddings` endpoint serves one (OpenAI, Ollama, vLLM, TEI, ...).

A tool has two vectors, of two texts (`document_texts`): everything that describes it, and its name
with its description's first sentence; its similarity to a task is the mean of theirs. The catalog
is centred (`_current_matrix`): the tools' mean is taken from each tool, and the mean of the tools'
names embedded as queries from each task, so what every tool or every task shares does not count;
and each tool's row leans a quarter toward its backend's direction (`_with_backends`).
Vectors are computed in the background once per catalog change, only for texts not seen before
(keyed by a hash of model and text), and kept in a `VectorStore` (the database when served), so a
restart embeds nothing again. A query costs one embedding request, bounded by the configured
timeout; the endpoint down, or vectors not ready yet, means lexical results and a warning, never a
failed search. The two rankings are fused by their scores, each scaled to 0..1 over its best
`FUSION_DEPTH` tools, and added with the configured weight (`fuse`).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import re
import time
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import httpx2 as httpx
import orjson

from toolweave.bounded import read_bounded
from toolweave.catalog.search import SearchDocument, ToolIndex
from toolweave.config.models import EmbeddingsConfig
from toolweave.errors import ToolweaveError
from toolweave.schemas.read import properties_of

np: Any = None
"""numpy, imported by the first `SemanticRanker` (`_import_numpy`): a gateway without
`[search.embeddings]`, and every CLI command, starts without it (66 ms of each start)."""


def _import_numpy() -> None:
    global np  # the module's one lazy import, bound once
    if np is None:
        try:
            import numpy
        except ImportError:  # pragma: no cover - depends on the install
            raise RuntimeError(
                "[search.embeddings] needs numpy: pip install 'toolweave[embeddings]'"
            ) from None
        np = numpy


logger = logging.getLogger("toolweave.search")

FUSION_DEPTH = 100
"""How many of each ranking's best take part in the fusion."""
BACKEND_WEIGHT = 0.25
"""A tool's row is its own direction plus this much of its backend's (`_with_backends`)."""
MAX_DOCUMENT_CHARS = 1500
MAX_PURPOSE_CHARS = 300
_FIRST_SENTENCE = re.compile(r"(.+?[.!?])(?:\s|$)", re.S)
BATCH_TIMEOUT_S = 300.0
"""One background batch of tool texts may take this long (a CPU-bound local model on a busy host)."""
RETRY_DELAYS_S = (5.0, 30.0, 120.0)
"""Waits before retrying tool vectors after the endpoint failed; then the next catalog change retries."""


class VectorStore(Protocol):
    """Where tool vectors persist across restarts (`store.tool_vectors.SqlVectorStore` when served)."""

    async def load(self, model: str, keys: Sequence[str]) -> dict[str, bytes]: ...

    async def save(self, model: str, vectors: Mapping[str, bytes]) -> None: ...


class MemoryVectorStore:
    """Vectors kept for the life of the process (a gateway used as a library)."""

    def __init__(self) -> None:
        self._vectors: dict[tuple[str, str], bytes] = {}

    async def load(self, model: str, keys: Sequence[str]) -> dict[str, bytes]:
        return {key: self._vectors[(model, key)] for key in keys if (model, key) in self._vectors}

    async def save(self, model: str, vectors: Mapping[str, bytes]) -> None:
        for key, vector in vectors.items():
            self._vectors[(model, key)] = vector


class EmbeddingError(ToolweaveError):
    """The endpoint failed or answered something that is not embeddings; the message says which."""


def _name_words(name: str) -> str:
    return name.replace("__", " ").replace("_", " ").replace("-", " ")


def document_text(document: SearchDocument) -> str:
    """Everything that describes a tool: its name as words, backend, description, parameters."""
    tool = document.tool
    name = _name_words(tool.name)
    parameters = " ".join(properties_of(tool.input_schema))
    backend = " ".join(filter(None, [document.backend.title, document.backend.description]))
    keywords = ", ".join(document.keywords)
    text = f"{name} ({backend}): {tool.description or tool.title or ''} Parameters: {parameters}. {keywords}"
    return text[:MAX_DOCUMENT_CHARS]


def purpose_text(document: SearchDocument) -> str:
    """What a tool is for, in short: its name as words and its description's first sentence."""
    text = (document.tool.description or document.tool.title or "").strip()
    match = _FIRST_SENTENCE.match(text)
    first = (match.group(1) if match else text)[:MAX_PURPOSE_CHARS]
    return f"{_name_words(document.tool.name)}: {first}"


def document_texts(document: SearchDocument) -> tuple[str, ...]:
    """The texts a tool's vectors are computed from; its similarity to a task is the mean of theirs.

    The whole text alone lets a long description's details (parameters, caveats, examples) pull its
    vector away from what the tool is for; the short one keeps that (bench, meaning alone, R@5 dev
    0.868 -> 0.893, held-out 0.557 -> 0.588).
    """
    return (document_text(document), purpose_text(document))


def query_text(document: SearchDocument) -> str:
    """A tool's name as words, embedded as a task would be: the mean of these over the catalog is
    what tasks put to it have in common (`SemanticRanker._current_matrix`)."""
    return _name_words(document.tool.name)


def text_key(model: str, text: str, as_query: bool = False) -> str:
    """A vector's key in the store: model and text (a text embedded as a query is another vector)."""
    kind = "query\n" if as_query else ""
    return hashlib.sha256(f"{model}\n{kind}{text}".encode()).hexdigest()[:40]


def _tool_texts(model: str, document: SearchDocument) -> list[tuple[str, str, bool]]:
    """(key, text, embedded as a query) of each of a tool's vectors: its texts, then its query text."""
    texts = [(text, False) for text in document_texts(document)] + [(query_text(document), True)]
    return [(text_key(model, text, as_query), text, as_query) for text, as_query in texts]


Ranking = Sequence[tuple[int, float]]
"""(tool position, score), best first."""


def fuse(lexical: Ranking, semantic: Ranking, semantic_weight: float = 1.0) -> list[int]:
    """The two rankings fused by score: each scaled to 0..1 over its best `FUSION_DEPTH` (the lexical
    score divided by the best one, a similarity min-max scaled), then added, the meaning-based one
    weighted `semantic_weight`.

    Scores, not ranks: a tool far ahead in one ranking keeps its lead, where reciprocal rank
    fusion flattens it (bench, held-out R@5 0.634 with RRF, 0.672 with this at weight 1).
    """
    scores: dict[int, float] = {}
    lexical = lexical[:FUSION_DEPTH]
    if lexical and lexical[0][1] > 0:
        best = lexical[0][1]
        for position, score in lexical:
            scores[position] = score / best
    semantic = semantic[:FUSION_DEPTH]
    if semantic:
        high, low = semantic[0][1], semantic[-1][1]
        spread = (high - low) or 1.0
        for position, similarity in semantic:
            scores[position] = scores.get(position, 0.0) + semantic_weight * (similarity - low) / spread
    return sorted(scores, key=lambda position: (-scores[position], position))


class SemanticRanker:
    """Tool vectors for the current index, filled in the background, and query ranking by cosine."""

    def __init__(self, config: EmbeddingsConfig, store: VectorStore | None = None) -> None:
        _import_numpy()
        self.config = config
        self.store: VectorStore = store if store is not None else MemoryVectorStore()
        self.last_error: str | None = None
        self._vectors: dict[str, Any] = {}
        self._index: ToolIndex | None = None
        self._keys: list[tuple[str, ...]] = []
        """Per tool of the index: the keys of its texts' vectors, its query text's last."""
        self._center: Any = None
        self._matrix: Any = None
        self._rows: list[int] = []
        self._task: asyncio.Task[None] | None = None
        self._http: httpx.AsyncClient | None = None

    # -- background: tool vectors ------------------------------------------

    def refresh(self, index: ToolIndex) -> None:
        """Start computing the vectors `index` lacks (in the background); cancels an older refresh."""
        self._index = index
        model = self.config.model
        self._keys = [tuple(key for key, _, _ in _tool_texts(model, doc)) for doc in index.documents]
        self._matrix = None
        if self._task is not None and not self._task.done():
            self._task.cancel()
        try:
            self._task = asyncio.get_running_loop().create_task(self._fill(index, list(self._keys)))
        except RuntimeError:
            self._task = None  # no event loop yet: the first query starts it

    @property
    def ready(self) -> bool:
        """Every tool of the current index has its vector."""
        return bool(self._keys) and all(key in self._vectors for keys in self._keys for key in keys)

    async def wait_ready(self, timeout: float) -> bool:
        """For tests and benches: wait until the current index's vectors are all there."""
        deadline = time.monotonic() + timeout
        while not self.ready and time.monotonic() < deadline:  # noqa: ASYNC110 - vectors arrive in batches
            await asyncio.sleep(0.05)
        return self.ready

    async def _fill(self, index: ToolIndex, keys: list[tuple[str, ...]]) -> None:
        texts = {
            key: (text, as_query)
            for doc in index.documents
            for key, text, as_query in _tool_texts(self.config.model, doc)
        }
        missing = [key for key in texts if key not in self._vectors]
        if not missing:
            return
        for key, raw in (await self.store.load(self.config.model, missing)).items():
            self._vectors[key] = np.frombuffer(raw, dtype=np.float32)
        missing = [key for key in missing if key not in self._vectors]
        for delay in (*RETRY_DELAYS_S, None):
            try:
                await self._embed_missing(missing, texts)
                self.last_error = None
                return
            except EmbeddingError as error:
                self.last_error = str(error)
                logger.warning("search: tool vectors not computed: %s", error)
                if delay is None:
                    return
                await asyncio.sleep(delay)
                missing = [key for key in missing if key not in self._vectors]

    async def _embed_missing(self, missing: list[str], texts: Mapping[str, tuple[str, bool]]) -> None:
        size = self.config.batch_size
        for as_query in (False, True):
            keys = [key for key in missing if texts[key][1] is as_query]
            for start in range(0, len(keys), size):
                await self._embed_batch(keys[start : start + size], texts, as_query)

    async def _embed_batch(
        self, batch: list[str], texts: Mapping[str, tuple[str, bool]], as_query: bool
    ) -> None:
        fields = self.config.query_fields if as_query else self.config.document_fields
        vectors = await self._embed([texts[key][0] for key in batch], fields)
        fresh = {key: _unit(vector) for key, vector in zip(batch, vectors, strict=True)}
        # stored before they count as ready: a gateway stopped once `ready` loses none of them
        await self.store.save(self.config.model, {key: v.tobytes() for key, v in fresh.items()})
        self._vectors.update(fresh)

    # -- the call path ----------------------------------------------------

    async def rank(self, query: str, index: ToolIndex) -> tuple[list[tuple[int, float]], str | None]:
        """(tool position, similarity) by meaning, best first, and a warning when there are none to give."""
        if index is not self._index or self._task is None:
            self.refresh(index)
        matrix, rows = self._current_matrix()
        if matrix is None:
            why = f": {self.last_error}" if self.last_error else " yet"
            return [], f"meaning-based ranking unavailable (tool vectors not computed{why}); lexical results"
        try:
            async with asyncio.timeout(self.config.timeout):
                (vector,) = await self._embed([query], self.config.query_fields)
        except TimeoutError:
            return (
                [],
                f"meaning-based ranking unavailable (the embeddings endpoint took over {self.config.timeout:g}s); lexical results",
            )
        except EmbeddingError as error:
            return [], f"meaning-based ranking unavailable ({error}); lexical results"
        similarities = matrix @ (_unit(vector) - self._center)
        best = np.argsort(-similarities)[:FUSION_DEPTH]
        return [(rows[i], float(similarities[i])) for i in best], None

    def _current_matrix(self) -> tuple[Any, list[int]]:
        """A row per tool whose vectors are all there (rebuilt as more arrive), and the centre taken
        from a task's vector (`_center`).

        A row is the mean of the tool's texts' unit vectors (so a task's similarity to it is the mean
        of its similarities to them), less the mean row, scaled to unit length; the centre is the mean
        of the tools' names embedded as queries. Without them, the direction every tool shares, and
        the one every task shares, favour the tools most like all the others, whatever the task
        (bench, meaning alone, R@5 dev 0.893 -> 0.901, held-out 0.588 -> 0.634).
        """
        rows = [row for row, keys in enumerate(self._keys) if all(key in self._vectors for key in keys)]
        if not rows:
            return None, []
        if self._matrix is None or len(rows) != len(self._rows):
            tools = np.vstack(
                [np.mean([self._vectors[key] for key in self._keys[row][:-1]], axis=0) for row in rows]
            )
            names = np.vstack([self._vectors[self._keys[row][-1]] for row in rows])
            if len(rows) > 1:
                tools = tools - tools.mean(axis=0)
            norms = np.linalg.norm(tools, axis=1, keepdims=True)
            tools = tools / np.where(norms > 0, norms, 1.0)
            backends = [self._index.documents[row].backend.name if self._index else "" for row in rows]
            self._matrix = _with_backends(tools, backends).astype(np.float32)
            self._center = names.mean(axis=0).astype(np.float32)
            self._rows = rows
        return self._matrix, self._rows

    # -- the endpoint -----------------------------------------------------

    async def _embed(self, texts: list[str], fields: Mapping[str, Any]) -> list[Any]:
        if self._http is None:
            headers = {"authorization": f"Bearer {self.config.api_key}"} if self.config.api_key else {}
            self._http = httpx.AsyncClient(headers=headers, timeout=httpx.Timeout(BATCH_TIMEOUT_S))
        body = {**fields, "model": self.config.model, "input": texts}
        limit = self.config.max_response_bytes
        try:
            async with self._http.stream("POST", self.config.url, json=body) as response:
                answer = await read_bounded(response, limit)
        except httpx.HTTPError as error:
            raise EmbeddingError(f"{self.config.url} unreachable: {type(error).__name__}") from error
        if answer is None:
            raise EmbeddingError(
                f"{self.config.url} answered more than {limit} bytes ([search.embeddings] max_response_bytes)"
            )
        if response.status_code != 200:
            text = answer[:200].decode(errors="replace")
            raise EmbeddingError(f"{self.config.url} answered HTTP {response.status_code}: {text}")
        try:
            data = sorted(orjson.loads(answer)["data"], key=lambda item: item.get("index", 0))
            vectors = [np.asarray(item["embedding"], dtype=np.float32) for item in data]
        except (ValueError, KeyError, TypeError, AttributeError) as error:
            raise EmbeddingError(f"{self.config.url} answered no embeddings ({error!r})") from error
        if len(vectors) != len(texts) or any(v.ndim != 1 or v.size == 0 for v in vectors):
            raise EmbeddingError(f"{self.config.url} answered {len(vectors)} vectors for {len(texts)} texts")
        return vectors

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
        if self._http is not None:
            await self._http.aclose()
            self._http = None


def _with_backends(tools: Any, backends: Sequence[str]) -> Any:
    """Each tool's row plus `BACKEND_WEIGHT` times its backend's direction (the mean of its tools'
    rows at unit length), so a task's similarity to a tool counts a quarter of its similarity to
    what the tool's backend does as a whole.

    A task that does not name its service is often nearer that service's tools together than the
    right tool alone; the backend's direction lifts the tools of the service the task is about over
    near misses of other services (bench, fused at 0.75, R@5 dev
    0.930 -> 0.934, held-out 0.763 -> 0.779). Tools without a backend get nothing added, and a
    catalog of one backend nothing at all: its direction is the catalog's mean, centred away.
    """
    named = sorted({name for name in backends if name})
    if len(named) < 2:
        return tools
    result = tools.copy()
    for name in named:
        members = [i for i, backend in enumerate(backends) if backend == name]
        direction = tools[members].mean(axis=0)
        norm = float(np.linalg.norm(direction))
        if norm > 1e-6:
            result[members] += BACKEND_WEIGHT * direction / norm
    return result


def _unit(vector: Any) -> Any:
    norm = float(np.linalg.norm(vector))
    return (vector / norm if norm else vector).astype(np.float32)
