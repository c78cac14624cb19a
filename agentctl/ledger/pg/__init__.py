"""The PostgreSQL backend of the ledger (psycopg 3; the ``postgres`` extra).

``adapter``: a psycopg connection seen as ``ledger.sql.Db`` and the one place where psycopg
errors become ``agentctl.errors``; ``schema``: the schema at ``SUPPORTED_SCHEMA_VERSION``, its
meta table, first-time setup and the refusals; ``ledger``: ``PgLedger``, the same
``LedgerService`` methods as SQLite's over SERIALIZABLE transactions retried on conflict
(docs/adr/0012-postgresql-transactions.md).

Imported only when a ``postgresql://`` URL is opened: nothing else loads psycopg.
"""
