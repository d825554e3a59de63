"""Search mode: clients list `find_tools` and `call_tool` (plus the pinned tools and, by default,
the composites) instead of the whole catalog; `find_tools` ranks the catalog with a field-weighted
BM25 (BM25F) over everything that describes a tool.

A tool's text is split into fields, each with its own weight: its name, title and description;
its parameters' names, and their descriptions and enum values (a tool may say "write operations for
pull requests" and name `create` only in an enum); its backend's name, title and description (from
the server's `initialize` answer and the backend's config, so a backend named `azdo` can still be
found by "Azure"); and the `keywords` the config gives a backend or a tool for the hard cases.
The index is built once per catalog snapshot; a query costs one pass over the postings of its terms.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import mcp_types as types

from toolweave.catalog.search_text import (
    compounds,
    document_terms,
    index_term,
    leading_words,
    name_terms,
    query_concepts,
    query_intent,
    word_pairs,
)

FIND_TOOLS = "find_tools"
CALL_TOOL = "call_tool"

SEARCH_TOOLS = [
    types.Tool(
        name=FIND_TOOLS,
        description=(
            "Find tools by what they do: returns the best matches, one line each (name, parameters, "
            "purpose). Call one with call_tool; detail=true adds each match's full input schema."
        ),
        input_schema={
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "What you want to do, in a few words"},
                "limit": {"type": "integer", "minimum": 1, "maximum": 50, "default": 5},
                "detail": {
                    "type": "boolean",
                    "default": False,
                    "description": "Include each tool's full input schema",
                },
            },
            "required": ["query"],
        },
        annotations=types.ToolAnnotations(read_only_hint=True),
    ),
    types.Tool(
        name=CALL_TOOL,
        description="Call a tool found with find_tools, by its name, with its arguments.",
        input_schema={
            "type": "object",
            "properties": {"name": {"type": "string"}, "arguments": {"type": "object"}},
            "required": ["name"],
        },
    ),
]
"""What a client lists in search mode (before the pinned tools and the composites)."""

FIELD_WEIGHTS: dict[str, float] = {
    "name": 3.0,
    "keywords": 3.0,
    "title": 2.0,
    "description": 1.0,
    "parameters": 0.6,
    "parameter_text": 0.3,
    "backend": 0.5,
    "name_pairs": 0.5,
}
"""How much a term found in each field counts, relative to the description (tuned on the bench's
development queries: `python -m bench.search`)."""

FIELD_LENGTH_NORMS: dict[str, float] = {
    "name": 0.3,
    "keywords": 0.0,
    "title": 0.3,
    "description": 0.75,
    "parameters": 0.5,
    "parameter_text": 0.75,
    "backend": 0.0,
    "name_pairs": 0.3,
}
"""BM25's `b` per field: long descriptions should not win by repeating words; a backend's text is
shared by all its tools, so its length says nothing."""

K1 = 6.0
"""BM25's term-frequency saturation: mild, so a word in a tool's name (weight 3) counts about two and
a half times one in a description, not barely more (at 1.2: 1.7 times; at 3: 2.2 times). Found by
`python -m bench.search.tune`."""
COVERAGE_POWER = 1.0
"""A tool's score is multiplied by (the query's words it matches / the query's words the index
knows) to this power: a tool that matches every word of a task beats one that matches one word
many times (0 turns it off)."""
SERVICE_MISS = 0.5
"""When a query names a backend ("on GitHub", "in Slack"), the score of every tool of the others is
multiplied by this: a tool of the named service comes first unless another matches far better."""
SERVICE_SHARE = 0.8
PREFIX_SHARE = 0.25
INTENT_MISS = 0.5
"""A question ("which ...", "is ...?") and a tool that says it changes things (`readOnlyHint` false),
or a request to change something ("create ...", "delete ...") and a tool that says it only reads:
the tool's score is multiplied by this. A tool that says nothing keeps its score."""
ACTION_MATCH = 1.1
"""A tool whose name's action (its first word after the gateway's namespace and a service's prefix:
`jira_create_issue` -> create) is the query's first word or one of its synonyms: its score is
multiplied by this, so "find all issues assigned to me" leans to the tool that searches issues
rather than the one that assigns them."""
MAX_ENUM_VALUES = 50
MAX_SCHEMA_DEPTH = 4


@dataclass(frozen=True)
class BackendText:
    """What describes a backend as a whole: shared by every tool it serves."""

    name: str = ""
    title: str = ""
    description: str = ""
    keywords: tuple[str, ...] = ()

    def text(self) -> str:
        return " ".join([self.name, self.title, self.description, *self.keywords])

    @classmethod
    def of(
        cls,
        name: str,
        server_info: types.Implementation | None,
        description: str | None = None,
        keywords: Sequence[str] = (),
    ) -> BackendText:
        """A backend's text: its config name, what its server says it is, and what its config adds."""
        info_names = [server_info.name, server_info.title or ""] if server_info else []
        described = [description or "", (server_info.description or "") if server_info else ""]
        return cls(
            name=name,
            title=" ".join(filter(None, info_names)),
            description=" ".join(filter(None, described)),
            keywords=tuple(keywords),
        )


@dataclass(frozen=True)
class SearchDocument:
    """One tool as the index sees it."""

    tool: types.Tool
    backend: BackendText = field(default_factory=BackendText)
    keywords: tuple[str, ...] = ()

    def fields(self) -> dict[str, str]:
        names, texts = _parameter_text(self.tool.input_schema or {})
        return {
            "name": self.tool.name,
            "keywords": " ".join(self.keywords),
            "title": self.tool.title
            or (self.tool.annotations.title if self.tool.annotations else None)
            or "",
            "description": self.tool.description or "",
            "parameters": " ".join(names),
            "parameter_text": " ".join(texts),
            "backend": self.backend.text(),
        }


def _parameter_text(schema: Mapping[str, Any]) -> tuple[list[str], list[str]]:
    """Parameter names, and their descriptions and enum values, nested objects included."""
    names: list[str] = []
    texts: list[str] = []

    def visit(node: Any, depth: int) -> None:
        if not isinstance(node, Mapping) or depth > MAX_SCHEMA_DEPTH:
            return
        properties = node.get("properties")
        if isinstance(properties, Mapping):
            for name, sub in properties.items():
                names.append(str(name))
                describe(sub)
                visit(sub, depth + 1)
        for key in ("items", "additionalProperties"):
            visit(node.get(key), depth + 1)
        for key in ("anyOf", "oneOf", "allOf"):
            options = node.get(key)
            if isinstance(options, list):
                for option in options:
                    describe(option)
                    visit(option, depth + 1)

    def describe(node: Any) -> None:
        if not isinstance(node, Mapping):
            return
        for key in ("description", "title"):
            if isinstance(node.get(key), str):
                texts.append(node[key])
        for key in ("enum", "examples"):
            values = node.get(key)
            if isinstance(values, list):
                texts.extend(str(value) for value in values[:MAX_ENUM_VALUES] if isinstance(value, str))
        if isinstance(node.get("const"), str):
            texts.append(node["const"])
        items = node.get("items")
        if isinstance(items, Mapping):
            describe(items)

    visit(schema, 0)
    return names, texts


FieldTerms = dict[str, Any]
DocumentTerms = dict[int, tuple[SearchDocument, FieldTerms]]
"""A tool object's id → (its document, its terms by field): what an index may reuse."""


def _terms_of(doc: SearchDocument, known: DocumentTerms | None) -> FieldTerms:
    """`doc`'s terms by field: splitting, stop words and stemming of every text it holds, the costly
    part of indexing, done once per tool object while its texts stay the same."""
    found = known.get(id(doc.tool)) if known is not None else None
    if found is not None and found[0].tool is doc.tool and found[0] == doc:
        return found[1]
    terms = {
        **{name: document_terms(text) for name, text in doc.fields().items()},
        "name_pairs": word_pairs(doc.tool.name),
    }
    if known is not None:
        known[id(doc.tool)] = (doc, terms)
    return terms


class ToolIndex:
    """An immutable BM25F index, rebuilt with each catalog snapshot.

    Each (term, tool) pair's whole contribution to a score is computed once here, so a query adds
    up precomputed numbers from its terms' postings and never looks at a tool that shares no term.
    """

    def __init__(
        self, documents: Iterable[SearchDocument | types.Tool], known: DocumentTerms | None = None
    ) -> None:
        """`known`: each document's terms from an earlier index, reused for a document whose tool is
        the same object (and whose backend text and keywords are equal); updated to this index's."""
        docs = [doc if isinstance(doc, SearchDocument) else SearchDocument(doc) for doc in documents]
        self.documents = docs
        self.tools = [doc.tool for doc in docs]
        field_terms = [_terms_of(doc, known) for doc in docs]
        if known is not None:
            kept = {id(doc.tool) for doc in docs}
            for key in [key for key in known if key not in kept]:
                del known[key]
        self.postings = _postings(field_terms)
        self.vocabulary = frozenset(self.postings)
        self.services = _services(docs, self.postings)
        self.actions = [_name_action(doc, self.services.keys()) for doc in docs]

    def __len__(self) -> int:
        return len(self.tools)

    def scores(self, query: str) -> dict[int, float]:
        """Each matching tool's score (by position in `tools`): its BM25F score over the query's
        terms, times `ACTION_MATCH` if its name's action is the query's first word, times
        `SERVICE_MISS` if the query names backends and not the tool's, times
        `INTENT_MISS` if the tool's `readOnlyHint` says the opposite of what the query asks, times
        the share of the query's words it matches (`COVERAGE_POWER`)."""
        concepts = [
            {term: weight for term, weight in concept.items() if term in self.vocabulary}
            for concept in query_concepts(query, self.vocabulary)
        ]
        concepts = [concept for concept in concepts if concept]
        weights: dict[str, float] = {}
        for concept in concepts:
            for term, weight in concept.items():
                weights[term] = max(weight, weights.get(term, 0.0))
        for pair in word_pairs(query):  # one more term, not one more word for the coverage
            if pair in self.vocabulary:
                weights[pair] = 1.0
        totals: dict[int, float] = defaultdict(float)
        matched: dict[str, list[int]] = {}
        for term, weight in weights.items():
            entries = self.postings[term]
            matched[term] = [index for index, _ in entries]
            for index, contribution in entries:
                totals[index] += weight * contribution
        self._lift_actions(totals, query)
        named = [
            self.services[term] for term, weight in weights.items() if weight == 1.0 and term in self.services
        ]
        if named:
            inside = set().union(*named)
            for index in totals.keys() - inside:
                totals[index] *= SERVICE_MISS
        intent = query_intent(query)
        if intent:
            for index in totals:
                annotations = self.tools[index].annotations
                read_only = annotations.read_only_hint if annotations else None
                if read_only is not None and read_only != (intent == "read"):
                    totals[index] *= INTENT_MISS
        if not COVERAGE_POWER or len(concepts) < 2:
            return totals
        covered: dict[int, int] = defaultdict(int)
        for concept in concepts:
            for index in {index for term in concept for index in matched[term]}:
                covered[index] += 1
        return {
            index: score * (covered[index] / len(concepts)) ** COVERAGE_POWER
            for index, score in totals.items()
        }

    def _lift_actions(self, totals: dict[int, float], query: str) -> None:
        """Multiply by `ACTION_MATCH` the score of each tool whose name's action the query starts with."""
        lead = leading_words(query, self.vocabulary)
        for index in totals:
            if self.actions[index] in lead:
                totals[index] *= ACTION_MATCH

    def ranked(self, query: str) -> list[tuple[int, float]]:
        """(position, score) of every matching tool, best first; ties keep catalog order."""
        return sorted(self.scores(query).items(), key=lambda item: (-item[1], item[0]))

    def search(self, query: str, limit: int = 10) -> list[types.Tool]:
        return [self.tools[index] for index, _ in self.ranked(query)[:limit]]


def _name_action(doc: SearchDocument, services: Iterable[str]) -> str | None:
    """The first term of a tool's name that is neither its backend's namespace nor a service's name
    (`slack_post_message` -> post, `API-get-users` -> get): where names say verb then object, what
    the tool does."""
    name = doc.tool.name
    if doc.backend.name and name.lower().startswith(doc.backend.name.lower()):
        name = name[len(doc.backend.name) :].lstrip("_-./")  # the gateway's namespace
    skip = {*services, "api"}
    terms = (index_term(part) for parts in compounds(name) for part in parts)
    return next((term for term in terms if term and term not in skip), None)


def _services(docs: Sequence[SearchDocument], postings: Mapping[str, Sequence[Any]]) -> dict[str, set[int]]:
    """term -> the tools of the backends it names. A term names backends when it is a word of
    their name or of their server's name and title, mostly found there (in `SERVICE_SHARE` of the
    tools that have it anywhere), and names at most half the backends ("server" names none)."""
    tools: dict[str, set[int]] = defaultdict(set)
    backends: dict[str, set[str]] = defaultdict(set)
    for index, doc in enumerate(docs):
        for term in name_terms(f"{doc.backend.name} {doc.backend.title}"):
            tools[term].add(index)
            backends[term].add(doc.backend.name)
    count = len({doc.backend.name for doc in docs})
    for term, named in _name_prefixes(docs).items():
        tools[term] |= named
        backends[term].add(docs[next(iter(named))].backend.name)
    return {
        term: named
        for term, named in tools.items()
        if term in postings
        and len(named) >= SERVICE_SHARE * len(postings[term])
        and len(backends[term]) <= count / 2
    }


def _name_prefixes(docs: Sequence[SearchDocument]) -> dict[str, set[int]]:
    """term -> the tools whose name starts with it, for a first word that a backend puts on
    `PREFIX_SHARE` of its tools' names (at least 3) and no other backend on any: `jira_` and
    `confluence_` name the two services of one server, `slack_` a backend named otherwise."""
    starts: dict[str, dict[str, set[int]]] = defaultdict(lambda: defaultdict(set))
    sizes: dict[str, int] = defaultdict(int)
    for index, doc in enumerate(docs):
        sizes[doc.backend.name] += 1
        name = doc.tool.name
        if doc.backend.name and name.lower().startswith(doc.backend.name.lower()):
            name = name[len(doc.backend.name) :].lstrip("_-./")  # the gateway's namespace
        parts = next(compounds(name), [])
        term = index_term(parts[0]) if len(parts) > 1 else None
        if term:
            starts[term][doc.backend.name].add(index)
    return {
        term: named
        for term, by_backend in starts.items()
        if len(by_backend) == 1
        for backend, named in by_backend.items()
        if len(named) >= max(3, PREFIX_SHARE * sizes[backend])
    }


def _postings(field_terms: Sequence[dict[str, list[str]]]) -> dict[str, list[tuple[int, float]]]:
    """term -> [(tool, contribution)] where contribution = idf * tf' / (k1 + tf'), tf' the BM25F
    pseudo-frequency: the field-weighted, field-length-normalised count of the term."""
    count = len(field_terms) or 1
    average = {
        name: (sum(len(terms[name]) for terms in field_terms) / count) or 1.0 for name in FIELD_WEIGHTS
    }
    pseudo: dict[str, list[tuple[int, float]]] = defaultdict(list)
    for index, terms in enumerate(field_terms):
        combined: defaultdict[str, float] = defaultdict(float)
        for name, words in terms.items():
            if not words:
                continue
            b = FIELD_LENGTH_NORMS[name]
            norm = 1 - b + b * len(words) / average[name]
            weight = FIELD_WEIGHTS[name] / norm
            for term, frequency in Counter(words).items():
                combined[term] += weight * frequency
        for term, tf in combined.items():
            pseudo[term].append((index, tf))
    postings: dict[str, list[tuple[int, float]]] = {}
    for term, entries in pseudo.items():
        idf = math.log(1 + (count - len(entries) + 0.5) / (len(entries) + 0.5))
        postings[term] = [(index, idf * tf / (K1 + tf)) for index, tf in entries]
    return postings
