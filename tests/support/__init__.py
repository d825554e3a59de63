"""What every test shares, one concern per module (imported as `support.<module>`):

- `paths`: where the test servers, the console script and the Python backends are;
- `processes`: free ports, child processes (the test MCP servers), waiting for a condition;
- `serving`: an ASGI app (a gateway's) under uvicorn on loopback, the one way tests serve HTTP;
- `configs`: config builders (backend entries as dicts, one TOML writer, parsed configs);
- `fakes`: a backend with a fixed tool list, an in-memory catalog, a recording call function;
- `results`: reading `CallToolResult`s (text, names, `_meta["toolweave"]`, run records);
- `fixtures`: the types of the shared fixtures of `tests/conftest.py`;
- `api`: REST API apps on a real database, and their fixtures (`make_app`, `sqlite_app`);
- `executor`: executor test configs, a signalling run store, call spans;
- `workflows`: workflows built against the in-memory catalog;
- `npm_documents`: real-world OpenAPI documents from npm packages, fetched once into a cache;
- `node`: Node 22 and the MCP conformance suite and its reference server, fetched once with npm.
"""
