"""The state store's schema migrations (Alembic): `env.py`, `versions/` (one module per revision) and the
frozen baseline (`baseline.py`). `ops.store.schema.upgrade` runs them; `make revision MSG="..."` writes
one."""
