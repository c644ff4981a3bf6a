"""The state store (SQLAlchemy Core): the one MetaData, the tables and their queries (`state`), the Alembic
migrations that create every table (`schema`, `migrations/`) and the messages to correct later. `state` and
`schema` import the pure helpers of `ops` only, so every other package can use the store; the environment
of the migrations imports the modules that define their tables on the store's MetaData (`ops.alerts`,
`ops.tpu`, `ops.vllm`).
"""
