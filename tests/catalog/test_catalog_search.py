"""Search mode's index: field-weighted BM25 over everything that describes a tool."""

from __future__ import annotations

import mcp_types as types

from support.fakes import tool
from toolweave.catalog.search import BackendText, SearchDocument, ToolIndex
from toolweave.catalog.search_text import (
    DOMAIN_WEIGHT,
    SYNONYM_WEIGHT,
    document_terms,
    query_concepts,
    query_intent,
    query_terms,
)

TIME = BackendText(name="time")
GH = BackendText(name="gh", title="github-mcp-server")
HUBSPOT = BackendText(name="hubspot", title="HubSpot CRM")
AZDO = BackendText(name="azdo", title="Azure DevOps MCP Server")

DOCS = [
    SearchDocument(
        tool(
            "time__get_current_time",
            description="Get current time in a specific timezone",
            properties={"timezone": {"type": "string"}},
        ),
        TIME,
    ),
    SearchDocument(
        tool(
            "time__convert_time",
            description="Convert time between timezones",
            properties={"source_timezone": {}, "time": {}, "target_timezone": {}},
        ),
        TIME,
    ),
    SearchDocument(
        tool("gh__search_issues", description="Search issues by keyword", properties={"q": {}}), GH
    ),
    SearchDocument(tool("gh__listPullRequests", description="List open pull requests of a repository"), GH),
    SearchDocument(
        tool(
            "gh__pull_request_write",
            description="Write operations for pull requests.",
            properties={"method": {"type": "string", "enum": ["create", "update", "merge"]}},
        ),
        GH,
    ),
    SearchDocument(
        tool("hubspot__list_objects", description="List CRM objects such as contacts and companies"), HUBSPOT
    ),
    SearchDocument(tool("azdo__pipelines_run", description="Start a new run of a pipeline"), AZDO),
    SearchDocument(
        tool("docs__search", description="Full-text search over the documentation"), BackendText("docs")
    ),
    SearchDocument(
        tool("weather__forecast", description="Weather forecast for a city", properties={"city": {}}),
        BackendText("weather"),
        keywords=("rain", "umbrella"),
    ),
]


def ranked(query: str, limit: int = 10) -> list[str]:
    return [t.name for t in ToolIndex(DOCS).search(query, limit)]


def test_compounds_are_indexed_split_and_whole() -> None:
    assert document_terms("gh__listPullRequests") == ["gh", "list", "pull", "request", "listpullrequest"]
    assert document_terms("HTTPServer") == ["http", "server", "httpserver"]
    assert document_terms("GitHub") == ["git", "hub", "github"]


def test_stop_words_are_dropped_and_words_stemmed() -> None:
    assert document_terms("What is in the issues?") == ["issu"]
    assert query_terms("is it in the pull requests", frozenset()) == {"pull": 1.0, "request": 1.0}


def test_a_compound_the_index_knows_whole_counts_whole() -> None:
    known = frozenset({"github", "git", "hub"})
    assert query_terms("GitHub", known) == {"github": 1.0}
    assert query_terms("GitHub", frozenset()) == {"git": 1.0, "hub": 1.0}


def test_best_match_first() -> None:
    assert ranked("convert a time between timezones")[0] == "time__convert_time"
    assert ranked("weather in a city")[0] == "weather__forecast"
    assert ranked("list pull requests")[0] == "gh__listPullRequests"
    assert ranked("current time")[0] == "time__get_current_time"


def test_function_words_do_not_pick_a_tool() -> None:
    assert ranked("what is in") == []


def test_enum_values_are_searchable() -> None:
    assert ranked("merge a pull request")[0] == "gh__pull_request_write"


def test_github_does_not_match_hubspot() -> None:
    assert ranked("GitHub") == ["gh__search_issues", "gh__listPullRequests", "gh__pull_request_write"]


def test_the_backend_name_and_server_title_are_searchable() -> None:
    assert ranked("run an Azure pipeline")[0] == "azdo__pipelines_run"
    assert ranked("crm companies")[0] == "hubspot__list_objects"


def test_keywords_from_config_find_a_tool() -> None:
    assert ranked("do I need an umbrella") == ["weather__forecast"]


def test_parameter_names_are_searchable() -> None:
    assert ranked("city")[0] == "weather__forecast"


def test_no_match_and_limit() -> None:
    assert ranked("kubernetes deployment") == []
    assert len(ranked("time", limit=1)) == 1
    assert ranked("") == []


def test_rare_terms_rank_above_common_ones() -> None:
    # "search" alone prefers the short docs__search; "keyword" (one tool only) tips it to gh__search_issues
    assert ranked("search")[0] == "docs__search"
    assert ranked("search keyword")[0] == "gh__search_issues"


def test_plain_tools_are_indexed_too() -> None:
    index = ToolIndex([types.Tool(name="a__ping", input_schema={"type": "object"})])
    assert [t.name for t in index.search("ping")] == ["a__ping"]


def test_empty_index() -> None:
    assert ToolIndex([]).search("anything") == []


def test_a_word_finds_its_synonyms_for_less_than_itself() -> None:
    erase = tool("db__erase_row", description="Erase a row")
    delete = tool("db__delete_row", description="Delete a row")
    index = ToolIndex([erase, delete])
    # "remove" is in neither tool's text: it finds both through its group (remove, delete, erase, ...)
    assert {t.name for t in index.search("remove a row")} == {"db__erase_row", "db__delete_row"}
    # the word itself counts more than its synonym
    assert index.search("delete a row")[0].name == "db__delete_row"
    assert index.search("erase a row")[0].name == "db__erase_row"


def test_synonyms_are_weighted_and_only_those_the_index_knows() -> None:
    assert query_terms("forget it", frozenset({"forget", "delet"})) == {
        "forget": 1.0,
        "delet": SYNONYM_WEIGHT,
    }
    assert query_terms("forget it", frozenset({"forget"})) == {"forget": 1.0}


def test_a_word_no_tool_uses_takes_its_wordnet_relatives_the_index_knows() -> None:
    # "mend" is in no SYNONYMS group; WordNet's most frequent sense of it is "repair, fix, ..."
    assert query_terms("mend the link", frozenset({"repair", "link"})) == {
        "mend": 1.0,  # unknown to the index, so it matches nothing
        "repair": SYNONYM_WEIGHT,
        "link": 1.0,
    }
    index = ToolIndex(
        [
            SearchDocument(tool("web__repair_link", description="Repair a broken link"), BackendText("web")),
            SearchDocument(tool("web__open_link", description="Open a link"), BackendText("web")),
        ]
    )
    assert index.search("mend the link")[0].name == "web__repair_link"


def test_wordnet_only_for_words_neither_a_tool_nor_a_synonym_reaches() -> None:
    # a word the index knows says what it means
    assert query_terms("mend it", frozenset({"mend", "repair"})) == {"mend": 1.0}
    # "halt" reaches "stop" through SYNONYMS: WordNet's "arrest" does not join
    assert query_terms("halt it", frozenset({"stop", "arrest"})) == {"halt": 1.0, "stop": SYNONYM_WEIGHT}


def test_a_word_no_tool_uses_takes_its_api_description_neighbours_the_index_knows() -> None:
    # web APIs describe "airport" with airline and flight; no SYNONYMS group or WordNet sense does
    index = ToolIndex(
        [
            tool("travel__search_flights", description="Search flights between two cities"),
            tool("calendar__create_event", description="Create an event"),
        ]
    )
    assert [found.name for found in index.search("airport")] == ["travel__search_flights"]
    assert query_terms("airport", frozenset({"flight", "airlin", "event"})) == {
        "airport": 1.0,
        "airlin": DOMAIN_WEIGHT,
        "flight": DOMAIN_WEIGHT,
    }
    # a word a tool uses says what it means
    assert query_terms("airport", frozenset({"airport", "flight"})) == {"airport": 1.0}


def test_a_tool_matching_every_word_beats_one_matching_a_rare_word_alone() -> None:
    tools = [
        tool("browser__close_window", description="Close the browser window"),
        tool("browser__close_tab", description="Close a browser tab"),
        tool(
            "gh__update_issue",
            description="Update an issue: its title, body, labels or state (open or closed)",
        ),
        tool("gh__get_issue", description="Get an issue"),
        tool("gh__list_issues", description="List issues"),
        tool("gh__add_issue_comment", description="Comment on an issue"),
    ]
    # "close" names the browser tools (rarer, so worth more), but only update_issue has both words
    assert ToolIndex(tools).search("close the issue")[0].name == "gh__update_issue"


PHRASE_TOOLS = [
    tool("time__convert_time", description="Convert a time between timezones"),
    tool("geo__elevation", description="Elevation of a point on the map"),
    tool("geo__city_info", description="Population, area and timezone of a city"),
    tool("metrics__list_events", description="List the events of a day"),
    tool("metrics__count_events", description="Count the events of a day"),
    tool("fs__read_file", description="Read a file"),
    tool("web__read_page", description="Read a web page"),
]


def phrase_ranked(query: str) -> list[str]:
    return [t.name for t in ToolIndex(PHRASE_TOOLS).search(query, 3)]


def test_a_phrase_stands_for_what_it_asks() -> None:
    assert phrase_ranked("how many events yesterday")[0] == "metrics__count_events"
    assert phrase_ranked("how tall is the Matterhorn")[0] == "geo__elevation"


def test_a_pattern_names_a_kind_of_thing() -> None:
    # "9:00" is a time of day, "notes.txt" a file, "example.com" a web page
    assert phrase_ranked("Berlin 9:00 in my city")[0] == "time__convert_time"
    assert phrase_ranked("read notes.txt")[0] == "fs__read_file"
    assert phrase_ranked("read example.com")[0] == "web__read_page"


def test_phrases_join_the_query_as_words() -> None:
    known = frozenset({"count", "number", "event", "pull", "request"})
    assert query_concepts("how many events", known)[-1] == {"count": 1.0, "number": 1.0}
    assert query_concepts("merge the PR", known)[-1] == {"pull": 1.0, "request": 1.0}


def test_general_vocabulary_reaches_a_tools_words() -> None:
    tools = [
        tool("tracker__update_issue", description="Update an issue"),
        tool("tracker__list_projects", description="List projects"),
        tool("maps__directions", description="Directions between two places"),
        tool("chat__send_message", description="Send a message to a channel"),
    ]
    index = ToolIndex(tools)
    assert index.search("revise the bug ticket")[0].name == "tracker__update_issue"
    assert index.search("my commute by car")[0].name == "maps__directions"
    assert index.search("dm my teammate")[0].name == "chat__send_message"


def test_a_word_in_the_name_counts_over_two_and_a_half_times_one_in_a_description() -> None:
    tools = [
        tool("db__backup", description="Back up a database"),
        tool("db__restore", description="Restore a database from a backup"),
        tool("db__list", description="List databases"),
        tool("db__drop", description="Drop a database"),
    ]
    scores = ToolIndex(tools).scores("backup")
    assert scores[0] > 2.5 * scores[1]  # k1 6 (at 3: 2.2 times)


def test_a_tool_of_the_service_the_query_names_comes_first() -> None:
    docs = [
        SearchDocument(
            tool("azdo__list_pull_requests", description="List the pull requests of a repository"), AZDO
        ),
        SearchDocument(tool("azdo__get_repository", description="Get a repository"), AZDO),
        SearchDocument(
            tool("gh__pull_requests", description="Pull requests of a repository, open or closed"), GH
        ),
        SearchDocument(tool("gh__get_file", description="Get a file from a repository"), GH),
    ]
    index = ToolIndex(docs)
    assert index.search("list the pull requests on github")[0].name == "gh__pull_requests"
    assert index.search("list the pull requests")[0].name == "azdo__list_pull_requests"
    # DevOps is one name: "dev" names no backend; a word every backend has ("server") names none
    assert {"github", "azur", "devop"} <= index.services.keys()
    assert not {"dev", "op", "server", "mcp"} & index.services.keys()


def test_question_words_and_tracker_words_stand_for_what_they_ask() -> None:
    tools = [
        tool("boards__create_work_item", description="Create a work item"),
        tool("boards__create_sprint", description="Create a sprint"),
        tool("repo__commit_files", description="The files of each commit"),
        tool("repo__commit_authors", description="The author of each commit"),
        tool("geo__office_staff", description="The staff of an office"),
        tool("geo__office_location", description="The location of an office"),
    ]
    index = ToolIndex(tools)  # each expected tool comes after its twin: catalog order breaks ties
    assert index.search("open a bug ticket")[0].name == "boards__create_work_item"
    assert index.search("who made this commit")[0].name == "repo__commit_authors"
    assert index.search("where is the Paris office")[0].name == "geo__office_location"


def test_words_side_by_side_in_a_name_count_more() -> None:
    tools = [
        tool("iam__list_access_requests", description="List the access requests waiting for approval"),
        tool("iam__request_access", description="Request access to a project"),
        tool("iam__list_projects", description="List projects"),
    ]
    index = ToolIndex(tools)
    assert index.search("access requests")[0].name == "iam__list_access_requests"
    assert index.search("request access")[0].name == "iam__request_access"


def test_a_phrasal_verb_counts_in_any_tense() -> None:
    known = frozenset({"regist", "creat", "account", "user"})
    for query in ("users who sign up", "users who signed up", "users signing up"):
        assert {"regist": 1.0, "creat": 1.0, "account": 1.0} in query_concepts(query, known)


def test_a_question_prefers_a_tool_that_reads_and_a_request_one_that_changes() -> None:
    reads = tool("db__table_rows", description="Rows of a table", read_only=True)
    changes = tool("db__table_rows_write", description="Rows of a table", read_only=False)
    silent = tool("db__table", description="A table")
    for tools in ([reads, changes, silent], [changes, reads, silent]):
        index = ToolIndex(tools)  # the same words: what the task asks for decides, not the order
        assert index.search("which rows are in the orders table?")[0].name == "db__table_rows"
        assert index.search("please delete rows of the orders table")[0].name == "db__table_rows_write"
    assert query_intent("What changed") == "read"
    assert query_intent("rows of a table?") == "read"
    assert query_intent("I want to remove the rows") == "change"
    assert query_intent("rows of a table") is None


def test_do_and_have_start_requests_as_well_as_questions() -> None:
    assert query_intent("do a backup of the orders table") is None
    assert query_intent("does the orders table exist") == "read"


def test_work_tracking_phrases_find_worklogs_transitions_and_watchers() -> None:
    tools = [
        tool("tracker__add_worklog", description="Add a worklog entry (time spent) to an issue"),
        tool("tracker__transition_issue", description="Transition an issue to a new status"),
        tool("tracker__add_watcher", description="Add a watcher to an issue"),
        tool("tracker__get_issue", description="Get an issue with its fields and history"),
        tool("tracker__service_logs", description="Logs of the tracker's work queue, by hour"),
        tool("tracker__move_issue", description="Move an issue to another project"),
        tool("tracker__notify", description="Notify users of a change"),
    ]
    index = ToolIndex(tools)
    assert index.search("log 3 hours of work on the issue")[0].name == "tracker__add_worklog"
    assert index.search("move PROJ-42 to done")[0].name == "tracker__transition_issue"
    assert index.search("mark the issue as in progress")[0].name == "tracker__transition_issue"
    assert index.search("follow this issue")[0].name == "tracker__add_watcher"
    # "blocked by" links two issues; "blocked" is not a status a phrase moves an issue to
    known = frozenset({"transit", "status", "block"})
    assert {"transit": 1.0, "status": 1.0} not in query_concepts("mark PROJ-10 as blocked by PROJ-11", known)


def test_the_querys_first_word_prefers_the_tool_named_for_that_action() -> None:
    tracker, chat = BackendText(name="tracker"), BackendText(name="chat")
    docs = [
        SearchDocument(tool("tracker__assign_issue", description="Assign an issue to a user"), tracker),
        SearchDocument(
            tool("tracker__search", description="Search issues by assignee, status or text"), tracker
        ),
        SearchDocument(tool("tracker__get_issue", description="Get an issue by key"), tracker),
    ]
    index = ToolIndex(docs)
    assert index.search("search issues assigned to Maria")[0].name == "tracker__search"
    assert index.search("assign the issue to Maria")[0].name == "tracker__assign_issue"
    # neither the gateway's namespace nor a service's prefix is the action: `slack_post_message` posts
    names = ["chat__slack_post_message", "chat__slack_get_messages", "chat__slack_list_channels"]
    index = ToolIndex([*docs, *(SearchDocument(tool(name, description="Slack"), chat) for name in names)])
    assert index.actions == ["assign", "search", "get", "post", "get", "list"]


def test_a_comparison_and_a_fact_to_keep_stand_for_what_they_ask() -> None:
    known = frozenset({"diff", "compar", "memori", "knowledg", "fact", "version"})
    assert {"diff": 1.0, "compar": 1.0} in query_concepts("what changed between version 3 and 4", known)
    assert {"memori": 1.0, "knowledg": 1.0, "fact": 1.0} in query_concepts("remember that Alice leads", known)
    assert {"memori": 1.0, "knowledg": 1.0, "fact": 1.0} not in query_concepts("remember the milk", known)


def test_keeping_a_fact_or_logging_work_is_a_change() -> None:
    assert query_intent("remember that Alice leads the team") == "change"
    assert query_intent("please note that the office moved") == "change"
    assert query_intent("log 3 hours on the ticket") == "change"
    assert query_intent("logs of the api pod") is None  # the verb, not the noun


def test_filing_a_ticket_a_name_and_a_subpage_stand_for_what_they_ask() -> None:
    known = frozenset({"creat", "titl", "child", "children", "bug", "page"})
    assert {"creat": 1.0} in query_concepts("open a new bug for the crash", known)
    assert {"creat": 1.0} in query_concepts("file a jira ticket about it", known)
    assert {"creat": 1.0} not in query_concepts("open the bug I filed", known)  # that one exists
    assert {"titl": 1.0} in query_concepts("the page called Release Process", known)
    assert {"child": 1.0, "children": 1.0} in query_concepts("list the subpages of the handbook", known)


def test_whether_checks_passed_asks_for_a_status() -> None:
    known = frozenset({"status", "check", "test", "pr"})
    assert {"status": 1.0, "check": 1.0} in query_concepts("did the tests pass on the PR", known)
    assert {"status": 1.0, "check": 1.0} in query_concepts("is the build still failing", known)
    assert {"status": 1.0, "check": 1.0} not in query_concepts("pass the test data", known)


def test_a_number_in_a_task_is_a_value_not_a_word_for_the_tool() -> None:
    known = frozenset({"issu", "42", "ec2", "ec", "2"})
    assert {"42": 1.0} not in query_concepts("show issue 42", known)
    assert {"ec2": 1.0} in query_concepts("start an EC2 instance", known)  # a compound stays whole
    tools = [
        tool("tracker__get_issue", description="Get an issue by its key"),
        tool("tracker__list_issues", description="List issues, 100 a page, 42 pages at most"),
    ]
    assert ToolIndex(tools).search("get issue 42 of 100")[0].name == "tracker__get_issue"
