"""JSON Schema in one place: reading, checking, compiling and coercing.

- `read`: keyword-by-keyword reads (`properties_of`, `required_of`, `type_names`, definitions),
  lenient about the sloppy schemas backends send.
- `check`: is a schema acceptable (`schema_error`: the metaschema, depth and size limits, local
  `$ref`s only, RE2 patterns); heavy checks off the event loop (`off_loop`).
- `validate`: validators compiled from an accepted schema (`compile_validator`,
  `ArgumentValidator` for a tool's arguments).
- `metaschema`: the 2020-12 metaschema as a table, checked in one linear walk.
- `fast`: the validation fast path for plain schemas.
- `coerce`: rendered template text turned into the types a schema asks for.

Schemas are untrusted input (tenants' definitions, backends' listings): everything here has a
bounded cost — see `check`.
"""
