"""Every environment variable the console reads, in one typed registry.

`console/settings.py` and the few modules that read the environment at run time (the
Kubernetes connector's configuration, the test hooks) read each value through its entry here
(`environment.WORKER_THREADS.value()`), and the documentation's configuration reference is
rendered from the same entries (docs/hooks/configuration.py), so the defaults the code uses
and the ones the documentation states cannot drift apart. tests/test_environment.py checks
that nothing reads `os.environ` around the registry and that every entry is read somewhere.

This module imports nothing from the project but `issuance.timing.durations` (no Django): the
settings module imports it before Django is set up, and the domain may use it too (the domain
never imports the web project).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any, Generic, TypeVar

from issuance.timing.durations import parse_duration

T = TypeVar("T")

BASE_DIR = Path(__file__).resolve().parent.parent
TRUE = frozenset({"1", "true", "yes", "on"})
FALSE = frozenset({"0", "false", "no", "off"})


@dataclass(frozen=True)
class Kind(Generic[T]):
    """How a variable's text becomes a value, and how the documentation names that."""

    label: str
    parse: Callable[[str], T]


def _flag(raw: str) -> bool:
    # Strict: a misspelt PRODUCTION=ture must stop the start-up, not quietly mean "off".
    return bool(_optional_flag(raw))


def _list(raw: str) -> list[str]:
    # Items are kept as written; only empty ones are dropped (ALLOWED_HOSTS=",a" is ["a"]).
    return [item for item in raw.split(",") if item]


def _nonblank_list(raw: str) -> list[str]:
    return [item for item in raw.split(",") if item.strip()]


def _seconds(raw: str) -> timedelta:
    """Plain seconds (`90`, `2.5`) or a Go duration (`90s`, `1h30m`)."""
    try:
        return timedelta(seconds=float(raw))
    except ValueError:
        return parse_duration(raw)


def _text_or_none(raw: str) -> str | None:
    return raw or None


def _optional_flag(raw: str) -> bool | None:
    """Empty: not chosen here (the setting follows another, such as PRODUCTION)."""
    if not raw.strip():
        return None
    word = raw.strip().lower()
    if word in TRUE:
        return True
    if word in FALSE:
        return False
    raise ValueError(f"not a flag: use one of {sorted(TRUE | FALSE)}")


def _optional_integer(raw: str) -> int | None:
    return int(raw) if raw.strip() else None


def _optional_seconds(raw: str) -> timedelta | None:
    return _seconds(raw) if raw.strip() else None


class BadValue(ValueError):
    """A variable's text that its kind cannot parse; the message names the variable."""


TEXT: Kind[str] = Kind("text", str)
OPTIONAL_TEXT: Kind[str | None] = Kind("text", _text_or_none)
INTEGER: Kind[int] = Kind("integer", int)
NUMBER: Kind[float] = Kind("number", float)
FLAG: Kind[bool] = Kind("flag: `1`, `true`, `yes`, `on` or `0`, `false`, `no`, `off`", _flag)
LIST: Kind[list[str]] = Kind("comma-separated list", _list)
NONBLANK_LIST: Kind[list[str]] = Kind("comma-separated list", _nonblank_list)
DURATION: Kind[timedelta] = Kind("seconds or a Go duration (`90s`, `1h30m`)", _seconds)
PATH: Kind[Path] = Kind("path", Path)
# Unset or empty: the setting follows its profile (PRODUCTION); `0`/`1` choose either way.
OPTIONAL_FLAG: Kind[bool | None] = Kind(
    "flag: `1`, `true`, `yes`, `on` or `0`, `false`, `no`, `off`", _optional_flag
)
OPTIONAL_INTEGER: Kind[int | None] = Kind("integer", _optional_integer)
OPTIONAL_DURATION: Kind[timedelta | None] = Kind(
    "seconds or a Go duration (`90s`, `1h30m`)", _optional_seconds
)


@dataclass(frozen=True)
class Variable(Generic[T]):
    name: str
    kind: Kind[T]
    default: str
    doc: str
    group: str
    # How the documentation shows the default, when the text above is not what a reader needs.
    shown_default: str | None = None
    # Whether an empty value (`NAME=`) means the default rather than an empty value.
    empty_is_unset: bool = False

    def raw(self) -> str | None:
        """The text in the environment now, or None when the variable is not set."""
        return os.environ.get(self.name)

    def value(self) -> T:
        """The parsed value, read from the environment now (tests change it at run time)."""
        raw = self.raw()
        if raw is None or (raw == "" and self.empty_is_unset):
            raw = self.default
        try:
            return self.kind.parse(raw)
        except ValueError as error:
            # Settings are read at start-up: the message is all an operator sees, so it says
            # which variable and what it holds, not only int()'s "invalid literal".
            raise BadValue(f"{self.name}={raw!r}: expected {self.kind.label} ({error})") from error

    def documented_default(self) -> str:
        if self.shown_default is not None:
            return self.shown_default
        return f"`{self.default}`" if self.default else ""


# In the order the documentation shows them.
GROUPS = (
    "Essentials",
    "Production and security",
    "Database",
    "Web processes and live updates",
    "Sign-in protection",
    "Worker and issuance",
    "Challenges",
    "Metrics",
    "Single sign-on (OpenID Connect)",
    "Kubernetes connector",
    "Tests and benchmarks",
)
VARIABLES: list[Variable[Any]] = []


def register(variable: Variable[T]) -> Variable[T]:
    if variable.group not in GROUPS:
        raise ValueError(f"{variable.name}: unknown group {variable.group!r}")
    if any(v.name == variable.name for v in VARIABLES):
        raise ValueError(f"{variable.name} is registered twice")
    VARIABLES.append(variable)
    return variable


def by_name(name: str) -> Variable[Any]:
    for variable in VARIABLES:
        if variable.name == name:
            return variable
    raise KeyError(name)


# --- Essentials -------------------------------------------------------------------------
DEBUG = register(
    Variable(
        "DEBUG",
        FLAG,
        "",
        "Django's debug mode: error pages with tracebacks, and a development `SECRET_KEY` "
        "when none is set. Never in production.",
        "Essentials",
        shown_default="off",
    )
)
SECRET_KEY = register(
    Variable(
        "SECRET_KEY",
        TEXT,
        "",
        "Django's secret (sessions, CSRF tokens, password reset links).",
        "Essentials",
        shown_default="(required unless `DEBUG=1`)",
    )
)
KEY_ENCRYPTION_KEY = register(
    Variable(
        "KEY_ENCRYPTION_KEY",
        TEXT,
        "",
        "Fernet key(s), comma separated: the first encrypts, all decrypt (rotation). Every "
        "private key and stored secret is encrypted with it: back it up with the database.",
        "Essentials",
        shown_default="(required)",
    )
)
ALLOWED_HOSTS = register(
    Variable(
        "ALLOWED_HOSTS",
        LIST,
        "127.0.0.1,localhost",
        "Host names the console answers to (also the allowed Origins of the live WebSocket).",
        "Essentials",
    )
)
CSRF_TRUSTED_ORIGINS = register(
    Variable(
        "CSRF_TRUSTED_ORIGINS",
        LIST,
        "",
        "Origins allowed to post forms behind a proxy (`https://console.example.com`).",
        "Essentials",
    )
)
LOG_LEVEL = register(
    Variable("LOG_LEVEL", TEXT, "INFO", "Logging level of every logger.", "Essentials")
)
MAX_BODY_BYTES = register(
    Variable(
        "MAX_BODY_BYTES",
        INTEGER,
        str(256 * 1024),
        "Larger request bodies are refused with 413.",
        "Essentials",
        empty_is_unset=True,
    )
)
STATIC_ROOT = register(
    Variable(
        "STATIC_ROOT",
        PATH,
        str(BASE_DIR / "staticfiles"),
        "Where `manage.py collectstatic` would put the static files. Not needed: the console "
        "serves them itself (WhiteNoise).",
        "Essentials",
        shown_default="`staticfiles/` in the project directory",
        empty_is_unset=True,
    )
)

# --- Production and security -----------------------------------------------------------
# One switch for the deployment profile (docs/production.md): behind TLS, cookies are
# Secure, plain HTTP is redirected and HSTS is sent. Not DEBUG: a production-like run without
# DEBUG over plain HTTP (`make run`, the test suite, the benchmarks) must keep working.
PRODUCTION = register(
    Variable(
        "PRODUCTION",
        FLAG,
        "",
        "The production profile: the console is reached over HTTPS only. Turns on "
        "`SECURE_SSL_REDIRECT`, secure session and CSRF cookies, and HSTS, unless each is set "
        "otherwise (see Running in production).",
        "Production and security",
        shown_default="off",
    )
)
SECURE_SSL_REDIRECT = register(
    Variable(
        "SECURE_SSL_REDIRECT",
        OPTIONAL_FLAG,
        "",
        "Redirect plain-HTTP requests to HTTPS (HTTP-01 challenge answers are never "
        "redirected). Behind a TLS-terminating proxy, set `TRUST_PROXY_HEADER` too.",
        "Production and security",
        shown_default="on with `PRODUCTION=1`",
    )
)
SECURE_COOKIES = register(
    Variable(
        "SECURE_COOKIES",
        OPTIONAL_FLAG,
        "",
        "Mark the session and CSRF cookies `Secure` (sent over HTTPS only).",
        "Production and security",
        shown_default="on with `PRODUCTION=1`",
    )
)
SECURE_HSTS_SECONDS = register(
    Variable(
        "SECURE_HSTS_SECONDS",
        OPTIONAL_INTEGER,
        "",
        "`Strict-Transport-Security` max-age on HTTPS answers; `0` sends none. Browsers "
        "then refuse plain HTTP to this host for that long: start low (`300`) on a new host.",
        "Production and security",
        shown_default="`31536000` (1 year) with `PRODUCTION=1`, else `0`",
    )
)
SECURE_HSTS_INCLUDE_SUBDOMAINS = register(
    Variable(
        "SECURE_HSTS_INCLUDE_SUBDOMAINS",
        OPTIONAL_FLAG,
        "",
        "HSTS covers the console host's subdomains too (`includeSubDomains`).",
        "Production and security",
        shown_default="on with `PRODUCTION=1`",
    )
)
SECURE_HSTS_PRELOAD = register(
    Variable(
        "SECURE_HSTS_PRELOAD",
        OPTIONAL_FLAG,
        "",
        "Add `preload` to HSTS: consent to browsers' preload lists (which take only a "
        "registrable domain's apex, so it is inert on a `console.example.com`).",
        "Production and security",
        shown_default="on with `PRODUCTION=1`",
    )
)
TRUST_PROXY_HEADER = register(
    Variable(
        "TRUST_PROXY_HEADER",
        TEXT,
        "",
        "The header the TLS-terminating proxy sets to `https` (`X-Forwarded-Proto`): requests "
        "carrying it count as HTTPS. Only behind a proxy that always sets or strips it; "
        "otherwise a client could claim HTTPS.",
        "Production and security",
        shown_default="none trusted",
    )
)
SESSION_COOKIE_AGE = register(
    Variable(
        "SESSION_COOKIE_AGE",
        DURATION,
        "12h",
        "A sign-in lasts at most this long, however active the user is.",
        "Production and security",
        empty_is_unset=True,
    )
)
SESSION_IDLE_TIMEOUT = register(
    Variable(
        "SESSION_IDLE_TIMEOUT",
        DURATION,
        "30m",
        "A session without a request from its user for this long is signed out (live "
        "updates and background refreshes do not count); `0` turns the idle limit off.",
        "Production and security",
        empty_is_unset=True,
    )
)

# --- Database ---------------------------------------------------------------------------
DATABASE_URL = register(
    Variable(
        "DATABASE_URL",
        TEXT,
        f"sqlite:///{BASE_DIR / 'db.sqlite3'}",
        "The database: `postgresql://user@host:5432/db` for PostgreSQL (several workers and "
        "web processes); SQLite for trying the console (one worker).",
        "Database",
        shown_default="`sqlite:///db.sqlite3` in the project directory",
        empty_is_unset=True,
    )
)
DATABASE_POOL_MAX_SIZE = register(
    Variable(
        "DATABASE_POOL_MAX_SIZE",
        INTEGER,
        "40",
        "PostgreSQL: connections in each process's pool (keep it above `WEB_THREADS` + 4 for "
        "a web process, `WORKER_THREADS` + 2 for a worker, their sum for `manage.py serve`); "
        "`0` turns the pool off (a connection per request, as Django's default).",
        "Database",
    )
)
DATABASE_POOL_TIMEOUT = register(
    Variable(
        "DATABASE_POOL_TIMEOUT",
        NUMBER,
        "1",
        "PostgreSQL: seconds a request or worker thread waits for a pooled connection before "
        "it looks whether the database answers a connection of its own: if not, it gives up "
        "(during a database outage requests answer 503 after about this long); if it does, "
        "the pool was only busy and it waits again, up to 30 s in all.",
        "Database",
    )
)
DATABASE_PREPARE_THRESHOLD = register(
    Variable(
        "DATABASE_PREPARE_THRESHOLD",
        INTEGER,
        "5",
        "PostgreSQL: a statement run this often on a connection is prepared on the server "
        "(parsed and planned once); `0` turns it off, which PgBouncer in transaction mode "
        "needs.",
        "Database",
    )
)

# --- Web processes and live updates -------------------------------------------------------
WEB_THREADS = register(
    Variable(
        "WEB_THREADS",
        INTEGER,
        "12",
        "Threads that run plain HTTP requests (API, pages) under ASGI, each request whole on "
        "one; more requests wait. Keep it below `DATABASE_POOL_MAX_SIZE`.",
        "Web processes and live updates",
    )
)
REDIS_URL = register(
    Variable(
        "REDIS_URL",
        TEXT,
        "",
        "Redis for live updates across processes (`redis://host:6379/0`). Unset: the "
        "in-memory channel layer, which only works when the worker runs in the web process "
        "(`manage.py serve`).",
        "Web processes and live updates",
    )
)
REDIS_MAX_CONNECTIONS = register(
    Variable(
        "REDIS_MAX_CONNECTIONS",
        INTEGER,
        "1000",
        "Redis connection pool size per process for the channel layer.",
        "Web processes and live updates",
    )
)
REDIS_TIMEOUT = register(
    Variable(
        "REDIS_TIMEOUT",
        DURATION,
        "2s",
        "Connect and read timeout of the channel layer's Redis connections: a Redis that "
        "never answers fails a call after this (see Failure modes).",
        "Web processes and live updates",
        empty_is_unset=True,
    )
)

# --- Sign-in protection ------------------------------------------------------------------
SIGNIN_FAILURE_LIMIT = register(
    Variable(
        "SIGNIN_FAILURE_LIMIT",
        INTEGER,
        "10",
        "Failed sign-ins (the login page, `POST /api/v1/token/`, wrong second-factor codes) after which the "
        "account, and apart from it the address they came from, are locked for "
        "`SIGNIN_LOCK_TIME`. Failures older than that are forgotten.",
        "Sign-in protection",
        empty_is_unset=True,
    )
)
SIGNIN_LOCK_TIME = register(
    Variable(
        "SIGNIN_LOCK_TIME",
        DURATION,
        "15m",
        "How long a locked account or address stays locked (an admin can lift a lock sooner "
        "on Users → Sign-in locks).",
        "Sign-in protection",
        empty_is_unset=True,
    )
)
TOKEN_FAILURE_LIMIT = register(
    Variable(
        "TOKEN_FAILURE_LIMIT",
        INTEGER,
        "30",
        "Unknown or revoked API tokens (`Authorization: Token`) and bootstrap tokens "
        "(`Authorization: Bearer`) one address may present per `SIGNIN_LOCK_TIME`; past "
        "it, token requests from there answer 429 with `Retry-After` until the window ends.",
        "Sign-in protection",
        empty_is_unset=True,
    )
)
TOKEN_ENDPOINT_RATE = register(
    Variable(
        "TOKEN_ENDPOINT_RATE",
        TEXT,
        "30/min",
        "Requests per address to `POST /api/v1/token/`, right or wrong (`N/sec`, `N/min`, "
        "`N/hour`, `N/day`); past it: 429 with `Retry-After`.",
        "Sign-in protection",
        empty_is_unset=True,
    )
)


def _two_factor_policy(raw: str) -> str:
    word = raw.strip().lower()
    if word not in ("admins", "all", "none"):
        raise ValueError("use admins, all or none")
    return word


TWO_FACTOR_POLICY: Kind[str] = Kind("`admins`, `all` or `none`", _two_factor_policy)

REQUIRE_2FA = register(
    Variable(
        "REQUIRE_2FA",
        TWO_FACTOR_POLICY,
        "admins",
        "Who must sign in with a second factor (an authenticator app's code): `admins` (users "
        "with the admin role), `all` local users, or `none` (a factor stays optional). A user "
        "who must have one and has none sets it up as part of their next sign-in.",
        "Sign-in protection",
        empty_is_unset=True,
    )
)
ENABLE_DJANGO_ADMIN = register(
    Variable(
        "ENABLE_DJANGO_ADMIN",
        FLAG,
        "0",
        "Serve Django's own admin site at `/admin/` (off: 404). When on, it takes admins only, "
        "signed in through the console's login page with their second factor.",
        "Sign-in protection",
        empty_is_unset=True,
    )
)


# --- Worker and issuance ------------------------------------------------------------------
WORKER_THREADS = register(
    Variable(
        "WORKER_THREADS",
        INTEGER,
        "8",
        "Reconcile threads per worker (`--threads N` overrides it).",
        "Worker and issuance",
    )
)
WORKER_LEASE = register(
    Variable(
        "WORKER_LEASE",
        DURATION,
        "20s",
        "How long a claimed object stays claimed if its worker dies; a live worker renews "
        "its claims every quarter of this.",
        "Worker and issuance",
        empty_is_unset=True,
    )
)
BACKOFF_MIN = register(
    Variable(
        "BACKOFF_MIN",
        DURATION,
        "1h",
        "Wait after a certificate's first failed issuance; doubled after each further one.",
        "Worker and issuance",
        empty_is_unset=True,
    )
)
BACKOFF_MAX = register(
    Variable(
        "BACKOFF_MAX",
        DURATION,
        "32h",
        "The longest wait between failed issuances.",
        "Worker and issuance",
        empty_is_unset=True,
    )
)
PROBE_INTERVAL = register(
    Variable(
        "PROBE_INTERVAL",
        DURATION,
        "6h",
        "How often each endpoint of a certificate is probed (spread over the interval); "
        "also at once after every new revision and on Check now.",
        "Worker and issuance",
        empty_is_unset=True,
    )
)
PROBE_CONCURRENCY = register(
    Variable(
        "PROBE_CONCURRENCY",
        INTEGER,
        "10",
        "Endpoint probes at once per worker, on threads of their own (each may use a "
        "database connection: keep `DATABASE_POOL_MAX_SIZE` above `WORKER_THREADS` + this "
        "+ 2).",
        "Worker and issuance",
    )
)
DEFAULT_MAX_SIGNING_DURATION = register(
    Variable(
        "DEFAULT_MAX_SIGNING_DURATION",
        DURATION,
        "8760h",
        "The longest a CA or selfSigned issuer without `maxDuration` signs for (1 year).",
        "Worker and issuance",
        empty_is_unset=True,
    )
)

# --- Challenges ---------------------------------------------------------------------------
MAX_CONCURRENT_CHALLENGES = register(
    Variable(
        "MAX_CONCURRENT_CHALLENGES",
        INTEGER,
        "60",
        "Challenges processing at once (the scheduler's cap).",
        "Challenges",
    )
)
CHALLENGE_PROCESSING_TIMEOUT = register(
    Variable(
        "CHALLENGE_PROCESSING_TIMEOUT",
        DURATION,
        "1h",
        "A challenge processing longer than this is failed, so it cannot hold a slot forever.",
        "Challenges",
        empty_is_unset=True,
    )
)
SELF_CHECK_INTERVAL = register(
    Variable(
        "SELF_CHECK_INTERVAL",
        DURATION,
        "10s",
        "How often a failing challenge self-check is retried.",
        "Challenges",
        empty_is_unset=True,
    )
)
SELF_CHECK_NAMESERVERS = register(
    Variable(
        "SELF_CHECK_NAMESERVERS",
        NONBLANK_LIST,
        "",
        "`host:port,…` the self-checks (and the approval policy's DNS check) ask instead of "
        "the zone's nameservers or the system resolver (split-horizon DNS).",
        "Challenges",
        shown_default="system resolver",
    )
)
ACME_WEBHOOK_SOLVERS = register(
    Variable(
        "ACME_WEBHOOK_SOLVERS",
        TEXT,
        "",
        "Where cert-manager-style DNS-01 webhooks (`groupName`, `solverName`, no `url`) are "
        "called: `groupName/solverName=https://…` entries separated by `;` (docs/dns-providers.md).",
        "Challenges",
    )
)
HTTP01_SELF_CHECK_PORT = register(
    Variable(
        "HTTP01_SELF_CHECK_PORT",
        INTEGER,
        "80",
        "Port the HTTP-01 self-check connects to.",
        "Challenges",
    )
)

# --- Metrics ------------------------------------------------------------------------------
METRICS_TOKEN = register(
    Variable(
        "METRICS_TOKEN",
        TEXT,
        "",
        "Bearer token that may read `/metrics` from anywhere.",
        "Metrics",
    )
)
METRICS_ALLOWED_NETWORKS = register(
    Variable(
        "METRICS_ALLOWED_NETWORKS",
        LIST,
        "127.0.0.1/32,::1/128",
        "Networks that may read `/metrics` without the token (the direct peer address; "
        "forwarded headers are not trusted).",
        "Metrics",
    )
)

# --- Single sign-on (OpenID Connect) ------------------------------------------------------
# docs/sso.md; console/web/oidc.py and issuance/access/oidc_mapping.py read them.
_SSO = "Single sign-on (OpenID Connect)"
OIDC_ISSUER_URL = register(
    Variable(
        "OIDC_ISSUER_URL",
        TEXT,
        "",
        "The OpenID Provider's issuer URL (its discovery document is "
        "`<issuer>/.well-known/openid-configuration`). Set, with `OIDC_CLIENT_ID`, it turns "
        'on "Sign in with …" on the login page.',
        _SSO,
        shown_default="(off)",
    )
)
OIDC_CLIENT_ID = register(
    Variable("OIDC_CLIENT_ID", TEXT, "", "The console's client id at the provider.", _SSO)
)
OIDC_CLIENT_SECRET_FILE = register(
    Variable(
        "OIDC_CLIENT_SECRET_FILE",
        TEXT,
        "",
        "A file holding the client secret (read at start-up; surrounding whitespace "
        "ignored). The secret itself is never taken from the environment.",
        _SSO,
    )
)
OIDC_SCOPES = register(
    Variable(
        "OIDC_SCOPES",
        TEXT,
        "openid profile email",
        "Scopes asked for, space-separated (`openid` is added if missing); some providers "
        "need another scope for the groups claim (Dex, Keycloak: `groups`).",
        _SSO,
        empty_is_unset=True,
    )
)
OIDC_GROUPS_CLAIM = register(
    Variable(
        "OIDC_GROUPS_CLAIM",
        TEXT,
        "groups",
        "The claim (ID token or userinfo) that lists the user's groups.",
        _SSO,
        empty_is_unset=True,
    )
)
OIDC_USERNAME_CLAIM = register(
    Variable(
        "OIDC_USERNAME_CLAIM",
        TEXT,
        "preferred_username",
        "The claim that becomes the console username when a user first signs in.",
        _SSO,
        empty_is_unset=True,
    )
)
OIDC_PROVIDER_NAME = register(
    Variable(
        "OIDC_PROVIDER_NAME",
        TEXT,
        "single sign-on",
        'The name on the login page\'s button ("Sign in with <name>").',
        _SSO,
        empty_is_unset=True,
    )
)
OIDC_GROUP_ROLES = register(
    Variable(
        "OIDC_GROUP_ROLES",
        TEXT,
        "",
        "Group → role rules applied at every sign-in, beside the ones admins edit on "
        "Users → Single sign-on: `group=role[,role][@cluster[/namespace],...]` separated by "
        "`;`, or JSON (docs/sso.md).",
        _SSO,
    )
)
LOCAL_LOGIN = register(
    Variable(
        "LOCAL_LOGIN",
        FLAG,
        "1",
        "Sign-in with a console password (the login form and `POST /api/v1/token/`). `0` "
        "leaves single sign-on only; API tokens already made keep working.",
        _SSO,
        empty_is_unset=True,
    )
)

# --- Kubernetes connector -----------------------------------------------------------------
KUBE_CONNECTOR = register(
    Variable(
        "KUBE_CONNECTOR",
        FLAG,
        "",
        "Run the Kubernetes CSR connector (see Kubernetes connector).",
        "Kubernetes connector",
        shown_default="off",
    )
)
KUBECONFIG = register(
    Variable(
        "KUBECONFIG",
        TEXT,
        "",
        "The connector's kubeconfig file.",
        "Kubernetes connector",
        shown_default="in-cluster config",
    )
)
KUBE_CONTEXT = register(
    Variable(
        "KUBE_CONTEXT",
        TEXT,
        "",
        "The kubeconfig's context for the connector.",
        "Kubernetes connector",
        shown_default="its current-context",
    )
)
KUBE_SIGNER_NAMES = register(
    Variable(
        "KUBE_SIGNER_NAMES",
        TEXT,
        "",
        "`signerName=issuerName,…`: the CSR signers the console approves and signs for "
        "(also maps bootstrap clients' `signerName`).",
        "Kubernetes connector",
    )
)

# In-cluster mode (`cluster add NAME --in-cluster`): where a pod finds its ServiceAccount and
# the API server. Kubernetes sets these; tests point them at a real apiserver.
KUBE_SERVICEACCOUNT_DIR = register(
    Variable(
        "KUBE_SERVICEACCOUNT_DIR",
        TEXT,
        "/var/run/secrets/kubernetes.io/serviceaccount",
        "In-cluster mode: the directory holding the pod's ServiceAccount `token`, `ca.crt` "
        "and `namespace` (the token is read again whenever the file changes).",
        "Kubernetes connector",
        empty_is_unset=True,
    )
)
KUBERNETES_SERVICE_HOST = register(
    Variable(
        "KUBERNETES_SERVICE_HOST",
        TEXT,
        "",
        "In-cluster mode: the API server's address; set by Kubernetes in every pod.",
        "Kubernetes connector",
        shown_default="set by Kubernetes",
    )
)
KUBERNETES_SERVICE_PORT = register(
    Variable(
        "KUBERNETES_SERVICE_PORT",
        TEXT,
        "",
        "In-cluster mode: the API server's port; set by Kubernetes in every pod.",
        "Kubernetes connector",
        shown_default="set by Kubernetes",
    )
)

# --- Tests and benchmarks -----------------------------------------------------------------
PYTEST_VERSION = register(
    Variable(
        "PYTEST_VERSION",
        TEXT,
        "",
        "Set by pytest: a development `SECRET_KEY` and `KEY_ENCRYPTION_KEY`, and fast "
        "password hashing.",
        "Tests and benchmarks",
    )
)
SQLITE_TEST_NAME = register(
    Variable(
        "SQLITE_TEST_NAME",
        OPTIONAL_TEXT,
        "",
        "The file of the SQLite test database (browser tests share it with their server).",
        "Tests and benchmarks",
    )
)
ISSUANCE_RECONCILE_TRACE = register(
    Variable(
        "ISSUANCE_RECONCILE_TRACE",
        TEXT,
        "",
        "A file every reconcile pass appends a line to (tests and `bench/issue_many.py --trace`).",
        "Tests and benchmarks",
    )
)
ISSUANCE_CRASH_AT = register(
    Variable(
        "ISSUANCE_CRASH_AT",
        TEXT,
        "",
        "A checkpoint name at which the process simulates a crash (crash tests).",
        "Tests and benchmarks",
    )
)
ISSUANCE_CRASH_MODE = register(
    Variable(
        "ISSUANCE_CRASH_MODE",
        TEXT,
        "",
        "`kill`: the crash at `ISSUANCE_CRASH_AT` is a real SIGKILL.",
        "Tests and benchmarks",
    )
)
