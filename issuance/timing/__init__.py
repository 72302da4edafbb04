"""Formulas of time, pure functions: Go-style and human durations (`durations`), cron
expressions for renewal windows (`cron`), the renewal time (`renewal`) and backoffs
(`backoff`)."""
