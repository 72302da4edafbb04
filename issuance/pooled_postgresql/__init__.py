"""Django's PostgreSQL backend with a pool that tells a busy database from a missing one
(the ENGINE console.settings uses when the pool is on; see base.py)."""
