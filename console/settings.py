"""Settings for Issuance Console, configured from the environment.

Every variable is read through its entry in issuance.environment, which the documentation's
configuration reference is rendered from (docs/configuration.md).
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import dj_database_url
import django_stubs_ext

from issuance import environment as env

# Lets runtime code write ModelAdmin[Model], QuerySet[Model] as the stubs do.
django_stubs_ext.monkeypatch()

BASE_DIR = Path(__file__).resolve().parent.parent
# The console's templates and static files live in the package, so an installed wheel finds
# them as a checkout does (docs/deploying.md).
CONSOLE_DIR = Path(__file__).resolve().parent

DEBUG = env.DEBUG.value()
_testing = bool(env.PYTEST_VERSION.value())
SECRET_KEY = env.SECRET_KEY.value() or ("insecure-development-key" if DEBUG or _testing else "")
if not SECRET_KEY:
    raise RuntimeError("SECRET_KEY must be set (make run generates one in .dev-env)")

ALLOWED_HOSTS = env.ALLOWED_HOSTS.value()
CSRF_TRUSTED_ORIGINS = env.CSRF_TRUSTED_ORIGINS.value()

# --- Transport and cookies (docs/production.md) --------------------------------------------
# PRODUCTION=1 is the profile for a console reached over HTTPS; each setting can still be
# chosen on its own. Off by default so `make run` (plain HTTP on 127.0.0.1) and the tests work.
PRODUCTION = env.PRODUCTION.value()


def _profile(chosen: bool | None) -> bool:
    return PRODUCTION if chosen is None else chosen


SECURE_SSL_REDIRECT = _profile(env.SECURE_SSL_REDIRECT.value())
SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^readyz$"]  # console.probes.REDIRECT_EXEMPT
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = _profile(env.SECURE_COOKIES.value())
_hsts = env.SECURE_HSTS_SECONDS.value()
SECURE_HSTS_SECONDS = (365 * 24 * 3600 if PRODUCTION else 0) if _hsts is None else _hsts
if SECURE_HSTS_SECONDS < 0:
    raise env.BadValue(f"SECURE_HSTS_SECONDS={SECURE_HSTS_SECONDS}: must be 0 or more")
SECURE_HSTS_INCLUDE_SUBDOMAINS = _profile(env.SECURE_HSTS_INCLUDE_SUBDOMAINS.value())
SECURE_HSTS_PRELOAD = _profile(env.SECURE_HSTS_PRELOAD.value())


def proxy_ssl_header(name: str) -> tuple[str, str] | None:
    """TRUST_PROXY_HEADER (`X-Forwarded-Proto`) as Django's META key and the value for HTTPS."""
    name = name.strip()
    if not name:
        return None
    if not all(c.isascii() and (c.isalnum() or c == "-") for c in name):
        raise env.BadValue(
            f"TRUST_PROXY_HEADER={name!r}: expected a header name such as X-Forwarded-Proto"
        )
    return ("HTTP_" + name.upper().replace("-", "_"), "https")


SECURE_PROXY_SSL_HEADER = proxy_ssl_header(env.TRUST_PROXY_HEADER.value())

# Sign-ins last SESSION_COOKIE_AGE at most from the sign-in, and end after SESSION_IDLE_TIMEOUT
# without a request from the user (console.sessions.SessionLimitsMiddleware, which holds both
# limits from timestamps in the session: Django's own expiry moves on with every save).
SESSION_COOKIE_AGE = int(env.SESSION_COOKIE_AGE.value().total_seconds())
SESSION_IDLE_TIMEOUT = int(env.SESSION_IDLE_TIMEOUT.value().total_seconds())
if SESSION_COOKIE_AGE <= 0 or SESSION_IDLE_TIMEOUT < 0:
    raise env.BadValue(
        "SESSION_COOKIE_AGE must be positive and SESSION_IDLE_TIMEOUT 0 (off) or positive"
    )
SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SAMESITE = "Lax"

# Headers on every answer (tests/test_security_headers.py). Django's defaults, written out so
# they stay even if a default changes, plus Permissions-Policy (console.security).
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
SECURE_CROSS_ORIGIN_OPENER_POLICY = "same-origin"

INSTALLED_APPS = [
    # django.contrib.admin with django-otp's OTPAdminSite (console/admin_site.py).
    "console.admin_apps.ConsoleAdminConfig",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    # Swagger UI's files for /api/docs/, served as our own static files (no CDN).
    "drf_spectacular_sidecar",
    "channels",
    # Failed sign-ins and locks (console/signin_protection.py), in the database: every process sees them.
    "axes",
    # Second factor for local accounts (console/signin_steps.py, docs/security.md). The
    # devices are the console's own (issuance/models/secondfactor.py: secrets encrypted,
    # recovery codes as digests); the two plugins stay installed only for migration 0020,
    # which moved their clear rows over (their tables stay empty).
    "django_otp",
    "django_otp.plugins.otp_totp",
    "django_otp.plugins.otp_static",
    "csp",
    "issuance",
    "console",
]

MIDDLEWARE = [
    # HTTP-01 answers for any Host header, before host checks and HTTPS redirects.
    "issuance.acme.solvers.http01.views.AcmeChallengeMiddleware",
    "django.middleware.security.SecurityMiddleware",
    # Before anything that answers early (the 503 page, static files), so those carry the
    # Content-Security-Policy and the other headers too.
    "csp.middleware.CSPMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "console.security.PermissionsPolicyMiddleware",
    # /healthz and /readyz (console.probes): before the host checks (CommonMiddleware), the
    # session, CSRF, sign-in and the 503 middleware; SECURE_REDIRECT_EXEMPT spares them the
    # HTTPS redirect. Probes come over plain HTTP to an address, without an account.
    "console.probes.ProbeMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    # 503 while the database is unreachable; before everything that uses it.
    "console.unavailable.DatabaseUnavailableMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "console.sessions.SessionLimitsMiddleware",
    # request.user.otp_device / is_verified() from the session (django-otp), then the steps
    # a sign-in still owes (second factor, forced password change, enrolment) before any
    # other page (console.signin_steps).
    "django_otp.middleware.OTPMiddleware",
    "console.signin_steps.SignInStepsMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    # Turns a sign-in refused by a lock into the lock's answer (console.signin_protection.lockout_response);
    # last, as django-axes asks.
    "axes.middleware.AxesMiddleware",
]

# No inline script or style anywhere (templates use static/ files; JavaScript sets styles
# through the CSSOM, which style-src does not govern). connect-src 'self' includes the live
# WebSocket (ws:/wss: to the same host, CSP Level 3; tests/browser/test_csp_live.py).
# data: images: Swagger UI's icons on /api/docs/.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'"],
        "img-src": ["'self'", "data:"],
        "connect-src": ["'self'"],
        "font-src": ["'self'"],
        "object-src": ["'none'"],
        "base-uri": ["'none'"],
        "form-action": ["'self'"],
        "frame-ancestors": ["'none'"],
    },
}

ROOT_URLCONF = "console.urls"
WSGI_APPLICATION = "console.wsgi.application"
ASGI_APPLICATION = "console.asgi.application"
# Under ASGI, plain HTTP requests run on this many long-lived threads (console.asgi_http);
# more requests than that wait on the event loop. Keep it below DATABASE_POOL_MAX_SIZE.
WEB_THREADS = env.WEB_THREADS.value()

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        # Listed first (not only through APP_DIRS) so they override the admin's and the
        # libraries' templates of the same name, whatever the order of INSTALLED_APPS.
        "DIRS": [CONSOLE_DIR / "templates"],
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

DATABASE_URL = env.DATABASE_URL.value()
# Each process's pool: under `manage.py serve` one process holds the web threads (WEB_THREADS),
# the HTTP-01 lookup threads, the worker's threads and its notifier at once.
DATABASE_POOL_MAX_SIZE = env.DATABASE_POOL_MAX_SIZE.value()
DATABASE_PREPARE_THRESHOLD = env.DATABASE_PREPARE_THRESHOLD.value()
# How long a request (or worker thread) waits for a pooled connection. A connection is ready,
# or made, in milliseconds; waiting longer only happens when the database is unreachable, and
# then a request must answer 503 within 2 s rather than hang (console.unavailable).
DATABASE_POOL_TIMEOUT = env.DATABASE_POOL_TIMEOUT.value()
_db: dict[str, Any] = dict(dj_database_url.parse(DATABASE_URL, conn_max_age=0))
if _db["ENGINE"] == "django.db.backends.sqlite3":
    # WAL lets the web threads read while the worker writes; IMMEDIATE avoids
    # the deadlock-prone read-then-upgrade lock dance of DEFERRED transactions.
    _db["OPTIONS"] = {
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        "transaction_mode": "IMMEDIATE",
        "timeout": 30,
    }
    _db["TEST"] = {"NAME": env.SQLITE_TEST_NAME.value()}
elif _db["ENGINE"] == "django.db.backends.postgresql" and DATABASE_POOL_MAX_SIZE > 0:
    # A process-wide psycopg pool: under ASGI each request runs in a fresh thread, so Django's
    # persistent connections (CONN_MAX_AGE) never get reused there and every request paid for
    # a new PostgreSQL backend (fork, authentication, catalog caches): measured as ~1/4 of the
    # database's CPU during bulk issuance. DATABASE_POOL_MAX_SIZE=0 turns the pool off.
    # Django's backend, except that a pool timeout with the database answering means a busy
    # pool, not an outage: the caller waits again (issuance.pooled_postgresql).
    _db["ENGINE"] = "issuance.pooled_postgresql"
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
if _db["ENGINE"] in ("django.db.backends.postgresql", "issuance.pooled_postgresql"):
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

if _testing:
    # Tests make hundreds of users; full-strength hashing would dominate the suite's time.
    PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]

# Checked when a user chooses a password (the console's password change page).
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "/static/"
# console/static is the console app's own static folder (the app finder serves it); none else.
STATICFILES_DIRS: list[Path] = []
STATIC_ROOT = env.STATIC_ROOT.value()
# WhiteNoise serves /static/ under uvicorn with DEBUG off; finders mean no collectstatic step.
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}
WHITENOISE_USE_FINDERS = True
# Without collectstatic there is no STATIC_ROOT; the finders serve everything then.
warnings.filterwarnings("ignore", message="No directory at")

# --- Sign-in protection (console/signin_protection.py, docs/security.md) -----------------------------
# Every password sign-in goes through authenticate(): the login page, POST /api/v1/token/ and
# /admin/. django-axes' backend comes first and refuses a locked account or address before any
# password is checked, so a lock gives away nothing about the password.
AUTHENTICATION_BACKENDS = [
    "console.signin_protection.LockingBackend",  # axes.backends.AxesStandaloneBackend
    "django.contrib.auth.backends.ModelBackend",
]
AXES_FAILURE_LIMIT = env.SIGNIN_FAILURE_LIMIT.value()
AXES_COOLOFF_TIME = env.SIGNIN_LOCK_TIME.value()
# Either locks: the account (failures from any address) and the address (failures on any
# account), so spraying one password over many accounts is stopped too.
AXES_LOCKOUT_PARAMETERS = ["username", "ip_address"]
# The database handler (the default, said here on purpose): CACHES is per process, and a
# lock must hold in every web process.
AXES_HANDLER = "axes.handlers.database.AxesDatabaseHandler"
# A success does not wipe the failures: on a shared address an attacker signing in to their
# own account would otherwise reset the address's count between guesses.
AXES_RESET_ON_SUCCESS = False
# A lock lasts SIGNIN_LOCK_TIME from the failure that set it; tries during it do not extend it.
AXES_RESET_COOL_OFF_ON_FAILURE_DURING_LOCKOUT = False
# Masked in the failures' stored request data: django-axes' defaults, and the code page's
# field (a mistyped recovery code is nearly a real one).
AXES_SENSITIVE_PARAMETERS = ["username", "ip_address", "code"]
AXES_CLIENT_IP_CALLABLE = "console.signin_protection.client_address"
AXES_LOCKOUT_CALLABLE = "console.signin_protection.lockout_response"
AXES_HTTP_RESPONSE_CODE = 429
# The log of successful sign-ins is the audit log (console.signin_protection records them).
AXES_DISABLE_ACCESS_LOG = True
AXES_VERBOSE = False
TOKEN_FAILURE_LIMIT = env.TOKEN_FAILURE_LIMIT.value()
# Second factor (docs/security.md): who must have one, and the issuer name authenticator apps
# show. Wrong codes count toward the lock above (AXES_*), the one throttle for every form:
# the console's devices have none of django-otp's per-device delays (they would also refuse
# a right code typed soon after a wrong one, and count it as a failure).
REQUIRE_2FA = env.REQUIRE_2FA.value()
OTP_TOTP_ISSUER = "Issuance Console"
# Django's admin site (/admin/): off unless chosen; when on it is django-otp's OTPAdminSite
# behind the console's own sign-in (console/admin_site.py).
ENABLE_DJANGO_ADMIN = env.ENABLE_DJANGO_ADMIN.value()
TOKEN_FAILURE_WINDOW = env.SIGNIN_LOCK_TIME.value()

# Rate limits (bad tokens, the token endpoint) count in each web process's memory, never in
# Redis: every API request reads them, and a frozen Redis would hold each request for
# REDIS_TIMEOUT (tests/live/test_redis_outage.py); with several web processes the limit is
# per process (docs/security.md). Password locks are in the database (AXES_HANDLER).
CACHES: dict[str, dict[str, Any]] = {
    "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"},
    "throttle": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": "rl"},
}

LOGIN_URL = "/login/"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "/login/"

# --- Single sign-on through an OpenID Provider (console/web/oidc.py, docs/sso.md) ----------
OIDC_ISSUER_URL = env.OIDC_ISSUER_URL.value().strip().rstrip("/")
OIDC_CLIENT_ID = env.OIDC_CLIENT_ID.value().strip()
OIDC_ENABLED = bool(OIDC_ISSUER_URL and OIDC_CLIENT_ID)
OIDC_CLIENT_SECRET = ""
if OIDC_ENABLED and env.OIDC_CLIENT_SECRET_FILE.value():
    try:
        OIDC_CLIENT_SECRET = Path(env.OIDC_CLIENT_SECRET_FILE.value()).read_text().strip()
    except OSError as _error:
        raise env.BadValue(
            f"OIDC_CLIENT_SECRET_FILE={env.OIDC_CLIENT_SECRET_FILE.value()!r}: {_error.strerror}"
        ) from _error
OIDC_SCOPES = env.OIDC_SCOPES.value().split()
if "openid" not in OIDC_SCOPES:
    OIDC_SCOPES.insert(0, "openid")
OIDC_GROUPS_CLAIM = env.OIDC_GROUPS_CLAIM.value().strip()
OIDC_USERNAME_CLAIM = env.OIDC_USERNAME_CLAIM.value().strip()
OIDC_PROVIDER_NAME = env.OIDC_PROVIDER_NAME.value().strip()
OIDC_GROUP_ROLES = env.OIDC_GROUP_ROLES.value()


def _check_group_roles(text: str) -> None:
    """A bad OIDC_GROUP_ROLES stops the start-up, naming the rule (issuance.access.oidc_mapping)."""
    from issuance.access.oidc_mapping import MappingError, parse_rules

    try:
        parse_rules(text)
    except MappingError as error:
        raise env.BadValue(str(error)) from error


_check_group_roles(OIDC_GROUP_ROLES)
# Password sign-in (the login form, POST /api/v1/token/); off leaves the provider only.
LOCAL_LOGIN = env.LOCAL_LOGIN.value()
if not LOCAL_LOGIN and not OIDC_ENABLED:
    raise env.BadValue(
        "LOCAL_LOGIN=0 needs OIDC_ISSUER_URL and OIDC_CLIENT_ID: nobody could sign in otherwise"
    )
if not LOCAL_LOGIN:
    # No password is checked anywhere (the admin site too); the provider's sessions still load.
    AUTHENTICATION_BACKENDS = [
        *AUTHENTICATION_BACKENDS[:-1],
        "issuance.access.oidc.NoPasswordBackend",
    ]

# Bodies bigger than this are refused (413) before any parsing.
DATA_UPLOAD_MAX_MEMORY_SIZE = env.MAX_BODY_BYTES.value()

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
    # Only views that name a scope are throttled (POST /api/v1/token/).
    "DEFAULT_THROTTLE_RATES": {"token": env.TOKEN_ENDPOINT_RATE.value()},
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Issuance Console API",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    # The API reference (/api/docs/, console.web.api_docs) loads Swagger UI from the sidecar.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    # No deep links: Swagger UI puts them as <a> inside each operation's <button>, which
    # screen readers and keyboards cannot reach (axe: nested-interactive).
    "SWAGGER_UI_SETTINGS": {"deepLinking": False},
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

REDIS_URL = env.REDIS_URL.value()
REDIS_TIMEOUT = env.REDIS_TIMEOUT.value().total_seconds()


def redis_channel_host(address: str) -> dict[str, Any]:
    """How the channel layer connects to Redis (one entry of its "hosts")."""
    from redis.asyncio.retry import Retry
    from redis.backoff import NoBackoff
    from redis.exceptions import ConnectionError as RedisConnectionError

    return {
        "address": address,
        # redis-py refuses (does not queue) past max_connections, 100 by default.
        "max_connections": env.REDIS_MAX_CONNECTIONS.value(),
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
KEY_ENCRYPTION_KEY = env.KEY_ENCRYPTION_KEY.value()
if not KEY_ENCRYPTION_KEY and _testing:
    KEY_ENCRYPTION_KEY = "6v2yQWZ1aH1m0Vn3m4bC8Kk0mJtq1o4c4Yq0lYbV1xk="  # tests only
BACKOFF_MIN = env.BACKOFF_MIN.value()
BACKOFF_MAX = env.BACKOFF_MAX.value()
MAX_CONCURRENT_CHALLENGES = env.MAX_CONCURRENT_CHALLENGES.value()
CHALLENGE_PROCESSING_TIMEOUT = env.CHALLENGE_PROCESSING_TIMEOUT.value()
SELF_CHECK_INTERVAL = env.SELF_CHECK_INTERVAL.value()
SELF_CHECK_NAMESERVERS = env.SELF_CHECK_NAMESERVERS.value()
HTTP01_SELF_CHECK_PORT = env.HTTP01_SELF_CHECK_PORT.value()
WORKER_THREADS = env.WORKER_THREADS.value()
# Endpoint probes (issuance/probing/): how often, and how many at once per worker.
PROBE_INTERVAL = env.PROBE_INTERVAL.value()
PROBE_CONCURRENCY = env.PROBE_CONCURRENCY.value()
# A claim's lease; the worker's heartbeat renews it every quarter of this while the item runs,
# so a worker that dies (SIGKILL, a lost host) frees its rows within this time.
WORKER_LEASE = env.WORKER_LEASE.value()
# The default maximum a CA or selfSigned issuer signs for, unless the issuer says.
DEFAULT_MAX_SIGNING_DURATION = env.DEFAULT_MAX_SIGNING_DURATION.value()
METRICS_TOKEN = env.METRICS_TOKEN.value()
METRICS_ALLOWED_NETWORKS = env.METRICS_ALLOWED_NETWORKS.value()

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env.LOG_LEVEL.value()},
    "loggers": {
        "django.db.backends": {"level": "WARNING"},
        # The pool warns at every failed reconnection (twice a second while the database is
        # down); the web (issuance.availability) and the worker (issuance.worker.outage) log
        # an outage once, when it starts and when it ends.
        "psycopg.pool": {"level": "ERROR"},
    },
}
