"""The store: ClickHouse through clickhouse-connect, embedded (chDB) or a server, and everything that owns its rows.

- `connection`: one connection (read-only sessions, queries, statements, idempotent inserts); `async_store` is its
  async shell on one thread; `urls` says what a URL names; `settings` is the store's slice of the settings.
- `migrations`: versioned DDL, the schema check and repair, retention TTLs (`retention` plans them).
- `erasure` and `erased_ids`: deleting a person's rows and remembering what was erased.
- `embedded_reader`: the read-only endpoint a running monitor serves for its embedded directory.

It imports only `schemas` (and its driver): an import contract in pyproject.toml says so."""
