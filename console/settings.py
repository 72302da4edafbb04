"""Settings for Issuance Console, configured from the environment (README, "Configuration")."""

from __future__ import annotations

import os
import warnings
from datetime import timedelta
from pathlib import Path
from typing import Any

import dj_database_url
import django_stubs_ext

# Lets runtime code write ModelAdmin[Model], QuerySet[Model] as the stubs do.
django_stubs_ext.monkeypatch()

BASE_DIR = Path(__file__).resolve().parent.parent


def env_bool(name: str, default: bool = False) -> bool:
    value = os.environ.get(name)
    if value is None:
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def env_seconds(name: str, default: float) -> timedelta:
    """A duration from the environment: plain seconds or Go form (`90s`, `1h30m`)."""
    raw = os.environ.get(name)
    if not raw:
        return timedelta(seconds=default)
    from issuance.durations import parse_duration

    try:
        return timedelta(seconds=float(raw))
    except ValueError:
        return parse_duration(raw)


DEBUG = env_bool("DEBUG", False)
SECRET_KEY = os.environ.get("SECRET_KEY") or (
    "insecure-development-key" if DEBUG or os.environ.get("PYTEST_VERSION") else ""
)
if not SECRET_KEY:
    raise RuntimeError("SECRET_KEY must be set (make run generates one in .dev-env)")

ALLOWED_HOSTS = [h for h in os.environ.get("ALLOWED_HOSTS", "127.0.0.1,localhost").split(",") if h]
CSRF_TRUSTED_ORIGINS = [o for o in os.environ.get("CSRF_TRUSTED_ORIGINS", "").split(",") if o]

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "channels",
    "issuance",
    "console",
]

MIDDLEWARE = [
    # HTTP-01 answers for any Host header, before host checks and HTTPS redirects.
    "issuance.solvers.http01_views.AcmeChallengeMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    # 503 while the database is unreachable; before everything that uses it.
    "console.unavailable.DatabaseUnavailableMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "console.urls"
WSGI_APPLICATION = "console.wsgi.application"
ASGI_APPLICATION = "console.asgi.application"
# Under ASGI, plain HTTP requests run on this many long-lived threads (console.asgi_http);
# more requests than that wait on the event loop. Keep it below DATABASE_POOL_MAX_SIZE.
WEB_THREADS = int(os.environ.get("WEB_THREADS", "12"))

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

DATABASE_URL = os.environ.get("DATABASE_URL") or f"sqlite:///{BASE_DIR / 'db.sqlite3'}"
# Each process's pool: under `manage.py serve` one process holds the web threads (WEB_THREADS),
# the HTTP-01 lookup threads, the worker's threads and its notifier at once.
DATABASE_POOL_MAX_SIZE = int(os.environ.get("DATABASE_POOL_MAX_SIZE", "40"))
DATABASE_PREPARE_THRESHOLD = int(os.environ.get("DATABASE_PREPARE_THRESHOLD", "5"))
# How long a request (or worker thread) waits for a pooled connection. A connection is ready,
# or made, in milliseconds; waiting longer only happens when the database is unreachable, and
# then a request must answer 503 within 2 s rather than hang (console.unavailable).
DATABASE_POOL_TIMEOUT = float(os.environ.get("DATABASE_POOL_TIMEOUT", "1"))
_db: dict[str, Any] = dict(dj_database_url.parse(DATABASE_URL, conn_max_age=0))
if _db["ENGINE"] == "django.db.backends.sqlite3":
    # WAL lets the web threads read while the worker writes; IMMEDIATE avoids
    # the deadlock-prone read-then-upgrade lock dance of DEFERRED transactions.
    _db["OPTIONS"] = {
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        "transaction_mode": "IMMEDIATE",
        "timeout": 30,
    }
    _db["TEST"] = {"NAME": os.environ.get("SQLITE_TEST_NAME") or None}
elif _db["ENGINE"] == "django.db.backends.postgresql" and DATABASE_POOL_MAX_SIZE > 0:
    # A process-wide psycopg pool: under ASGI each request runs in a fresh thread, so Django's
    # persistent connections (CONN_MAX_AGE) never get reused there and every request paid for
    # a new PostgreSQL backend (fork, authentication, catalog caches): measured as ~1/4 of the
    # database's CPU during bulk issuance. DATABASE_POOL_MAX_SIZE=0 turns the pool off.
    _db.setdefault("OPTIONS", {})["pool"] = {
        "min_size": 1,
        "max_size": DATABASE_POOL_MAX_SIZE,
        "timeout": DATABASE_POOL_TIMEOUT,
        # A failed (re)connection is retried once, then given up, instead of being retried
        # in the background with exponential backoff for 5 minutes: after an outage the next
        # request that needs a connection makes one at once, rather than waiting for the
        # backoff's next try (its gaps double: 1, 2, 4, 8, 16 s ...).
        "reconnect_timeout": 1.0,
    }
    # Each connection taken from the pool is checked first (an empty statement, one round
    # trip): after PostgreSQL restarted, the idle ones are dead and are never handed out.
    _db["CONN_HEALTH_CHECKS"] = True
if _db["ENGINE"] == "django.db.backends.postgresql":
    # libpq waits forever for an unreachable host by default (2 s is libpq's minimum);
    # a refused or closed port fails at once anyway.
    _db.setdefault("OPTIONS", {}).setdefault("connect_timeout", 2)
    # Parameters bound by the server, and statements run DATABASE_PREPARE_THRESHOLD times on a
    # connection prepared there (parsed and planned once): the worker repeats a few dozen
    # statement shapes. 0 turns preparing off (PgBouncer in transaction mode needs that).
    _db.setdefault("OPTIONS", {})["server_side_binding"] = True
    if DATABASE_PREPARE_THRESHOLD > 0:
        _db["OPTIONS"]["prepare_threshold"] = DATABASE_PREPARE_THRESHOLD
DATABASES = {"default": _db}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

if os.environ.get("PYTEST_VERSION"):
    # Tests make hundreds of users; full-strength hashing would dominate the suite's time.
    PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "/static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = Path(os.environ.get("STATIC_ROOT") or BASE_DIR / "staticfiles")
# WhiteNoise serves /static/ under uvicorn with DEBUG off; finders mean no collectstatic step.
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}
WHITENOISE_USE_FINDERS = True
# Without collectstatic there is no STATIC_ROOT; the finders serve everything then.
warnings.filterwarnings("ignore", message="No directory at")

LOGIN_URL = "/login/"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "/login/"

# Bodies bigger than this are refused (413) before any parsing.
DATA_UPLOAD_MAX_MEMORY_SIZE = int(os.environ.get("MAX_BODY_BYTES") or 256 * 1024)

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "issuance.api.auth.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["issuance.api.permissions.RolePermission"],
    "DEFAULT_PAGINATION_CLASS": "issuance.api.query.Pagination",
    "PAGE_SIZE": 50,
    "DEFAULT_SCHEMA_CLASS": "issuance.api.schema.AutoSchema",
    "EXCEPTION_HANDLER": "issuance.api.errors.exception_handler",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Issuance Console API",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    # Request and response components apart: required text fields get `minLength: 1` in
    # requests, read-only fields stay out of them.
    "COMPONENT_SPLIT_REQUEST": True,
    "ENUM_NAME_OVERRIDES": {
        "CertificateStateEnum": "issuance.models.CertificateState",
        "RequestStateEnum": "issuance.models.RequestState",
        "AcmeStateEnum": "issuance.models.ChallengeState",  # an Order's states are the same
        "IssuerKindEnum": ["Issuer", "ClusterIssuer"],
    },
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "console.unavailable.document_503",
    ],
}

REDIS_URL = os.environ.get("REDIS_URL", "")
REDIS_TIMEOUT = env_seconds("REDIS_TIMEOUT", 2).total_seconds()


def redis_channel_host(address: str) -> dict[str, Any]:
    """How the channel layer connects to Redis (one entry of its "hosts")."""
    from redis.asyncio.retry import Retry
    from redis.backoff import NoBackoff
    from redis.exceptions import ConnectionError as RedisConnectionError

    return {
        "address": address,
        # redis-py refuses (does not queue) past max_connections, 100 by default.
        "max_connections": int(os.environ.get("REDIS_MAX_CONNECTIONS", "1000")),
        # A Redis that accepts connections but never answers (stopped, swapping) fails
        # calls after this instead of holding them forever; console.live and the consumers
        # also bound every call they make.
        "socket_connect_timeout": REDIS_TIMEOUT,
        "socket_timeout": REDIS_TIMEOUT,
        # After a Redis restart the pooled connections to the old one fail on first use:
        # redis-py reconnects and sends again, once, and only after a connection error (a
        # Redis that does not answer is not asked twice).
        "retry": Retry(NoBackoff(), 1, supported_errors=(RedisConnectionError,)),
    }


if REDIS_URL:
    CHANNEL_LAYERS = {
        "default": {
            # Pub/sub: one Redis message per group, fanned out to the browsers inside each web
            # process (the list-based core layer pops one Redis entry per browser and was 3×
            # slower at p99 in bench/ws_latency.py). Live updates are nudges, so at-most-once
            # delivery is fine: browsers re-fetch on reconnect.
            "BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
            "CONFIG": {"hosts": [redis_channel_host(REDIS_URL)]},
        }
    }
else:
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}

# --- Issuance settings ----------------------------------------------------------
# Fernet keys, comma separated; the first encrypts, all decrypt (so keys rotate).
KEY_ENCRYPTION_KEY = os.environ.get("KEY_ENCRYPTION_KEY", "")
if not KEY_ENCRYPTION_KEY and os.environ.get("PYTEST_VERSION"):
    KEY_ENCRYPTION_KEY = "6v2yQWZ1aH1m0Vn3m4bC8Kk0mJtq1o4c4Yq0lYbV1xk="  # tests only
BACKOFF_MIN = env_seconds("BACKOFF_MIN", 3600)
BACKOFF_MAX = env_seconds("BACKOFF_MAX", 32 * 3600)
MAX_CONCURRENT_CHALLENGES = int(os.environ.get("MAX_CONCURRENT_CHALLENGES", "60"))
CHALLENGE_PROCESSING_TIMEOUT = env_seconds("CHALLENGE_PROCESSING_TIMEOUT", 3600)
SELF_CHECK_INTERVAL = env_seconds("SELF_CHECK_INTERVAL", 10)
SELF_CHECK_NAMESERVERS = [
    s for s in os.environ.get("SELF_CHECK_NAMESERVERS", "").split(",") if s.strip()
]
HTTP01_SELF_CHECK_PORT = int(os.environ.get("HTTP01_SELF_CHECK_PORT", "80"))
WORKER_THREADS = int(os.environ.get("WORKER_THREADS", "8"))
# A claim's lease; the worker's heartbeat renews it every quarter of this while the item runs,
# so a worker that dies (SIGKILL, a lost host) frees its rows within this time.
WORKER_LEASE = env_seconds("WORKER_LEASE", 20)
# The default maximum a CA or selfSigned issuer signs for, unless the issuer says.
DEFAULT_MAX_SIGNING_DURATION = env_seconds("DEFAULT_MAX_SIGNING_DURATION", 365 * 24 * 3600)
METRICS_TOKEN = os.environ.get("METRICS_TOKEN", "")
METRICS_ALLOWED_NETWORKS = [
    n for n in os.environ.get("METRICS_ALLOWED_NETWORKS", "127.0.0.1/32,::1/128").split(",") if n
]

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "INFO")},
    "loggers": {
        "django.db.backends": {"level": "WARNING"},
        # The pool warns at every failed reconnection (twice a second while the database is
        # down); the web (issuance.availability) and the worker (issuance.worker.outage) log
        # an outage once, when it starts and when it ends.
        "psycopg.pool": {"level": "ERROR"},
    },
}
