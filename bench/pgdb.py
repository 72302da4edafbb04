"""Shared by the benchmarks: make sure their PostgreSQL database exists."""

from __future__ import annotations


def ensure_database(url: str) -> None:
    """Create the database named in a postgresql:// URL if it is missing (others: no-op)."""
    if not url.startswith("postgres"):
        return
    import psycopg

    dbname = url.rsplit("/", 1)[1]
    admin = url.rsplit("/", 1)[0] + "/postgres"
    with psycopg.connect(admin, autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [dbname]).fetchone()
        if not exists:
            conn.execute(f'CREATE DATABASE "{dbname}"')
