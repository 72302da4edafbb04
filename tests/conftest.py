"""Shared fixtures (users per role, API clients) and the suite's rules: modules in a random
order with the seed printed, no skip under CI=true unless allow-listed here, and no module
leaving rows behind in the test database."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from issuance.access.roles import ROLES
from tests.factories import role_group

# tests/test_skip_policy.py runs small suites through pytester.
pytest_plugins = ["pytester"]

# The ONE allow-list of skips under CI=true: node id -> why skipping it is right. Keep it
# short; a skip that hides a missing server or package belongs fixed, not here.
ALLOWED_SKIPS: dict[str, str] = {
    "tests/worker/test_run_loop.py::test_sqlite_sees_other_connections_commits": (
        "PRAGMA data_version is SQLite's: on PostgreSQL the worker is woken by LISTEN/NOTIFY, "
        "which tests/worker/test_listen*.py cover"
    ),
}


# Test modules that share one expensive session fixture (kube-apiservers) run in one
# pytest-xdist worker, so each worker does not start its own.
SHARED_SERVER_MODULES = (
    ("tests/clusters/", "kube-cert-manager"),
    ("tests/browser/test_live_cluster.py", "kube-cert-manager"),
    ("tests/kube/", "kube-csr"),
)


def worker_group(nodeid: str) -> str:
    """The unit of work handed to one pytest-xdist worker: a test module (so module fixtures
    such as a PowerDNS or Pebble start once), or the modules that share session servers."""
    module = nodeid.split("::", 1)[0]
    for prefix, group in SHARED_SERVER_MODULES:
        if module.startswith(prefix):
            return group
    return module


@pytest.hookimpl(optionalhook=True)  # a pytest-xdist hook: absent when it is not loaded
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    # Not `--dist loadgroup` with xdist_group marks: pytest-xdist 3.8 writes the group into
    # Item._nodeid, which pytest 9 no longer reads, so the marks are silently ignored.
    from xdist.scheduler import LoadScopeScheduling

    scheduler = LoadScopeScheduling(config, log)
    scheduler._split_scope = worker_group  # the scope of a node id: its module, by default
    return scheduler


# -- random module order -------------------------------------------------------------------
# pytest-random-order rather than pytest-randomly: it does nothing unless asked (`make test`
# passes --random-order-bucket=module; a plain `pytest tests/x.py` keeps the file's order),
# and it only reorders: pytest-randomly also reseeds `random` before every test and shuffles
# the tests inside each module and class. The tests of a module keep their written order
# (module fixtures such as a Pebble or a live server carry state from one to the next; the
# order of the modules is what this checks), and the modules sharing kube-apiservers stay
# one unit. The controller passes its seed to every pytest-xdist worker, so all of them
# collect the same order, as pytest-xdist requires. Hypothesis keeps its own random
# generator and schemathesis its fixed seed (tests/contract/schemathesis.toml): neither is
# touched.


def random_order_seed(config: pytest.Config) -> str | None:
    """The seed of this run's module order, or None when the order is the collection order."""
    bucket = str(config.getoption("random_order_bucket", default="default:"))
    seed = str(config.getoption("random_order_seed", default="default:"))
    enabled = bool(config.getoption("random_order_enabled", default=False))
    if not (enabled or not bucket.startswith("default:") or not seed.startswith("default:")):
        return None
    return seed.removeprefix("default:")


# The work units that take longest (each 1.5-3 min of the PostgreSQL run: `--durations` of a
# run with load average ~16 on 2 cores, seed 1111). In a random order one of them could
# start last and keep one pytest-xdist process busy minutes after the others have finished;
# so these go first (in the seed's order among themselves), then everything else.
# The API contract runs are the longest of all (4 min idle; more than 15 min on a loaded CI
# machine): they go first of all, whatever the seed.
FIRST_OF_ALL = frozenset(
    {"tests/contract/test_schemathesis_certificates.py", "tests/contract/test_schemathesis.py"}
)
LONGEST_FIRST = frozenset(
    {
        "kube-cert-manager",
        "tests/browser/test_clusters_ui.py",
        "tests/browser/test_accessibility.py",
        "tests/browser/test_certificates_ui.py",
        "tests/browser/test_redis_outage.py",
        "tests/e2e/test_ca_outage.py",
        "tests/e2e/test_ca_outage_invalid.py",
        "tests/e2e/test_pg_outage_worker.py",
        "tests/e2e/test_pg_outage_web.py",
        "tests/e2e/test_selfcheck_dns_outage.py",
        "tests/worker/test_processes.py",
        "tests/notifications/test_cluster_unreachable.py",
        "tests/e2e/test_dns01_route53.py",
    }
)


class ModuleOrder:
    """Undo pytest-random-order's shuffle inside each module, keeping its order of modules;
    keep the modules of one worker_group together; the FIRST_OF_ALL units first, then the
    LONGEST_FIRST ones."""

    def __init__(self) -> None:
        self.written: dict[str, int] = {}

    # Two implementations of one hook in one plugin: specname (pytest only reads methods
    # whose names start with "pytest_").
    @pytest.hookimpl(specname="pytest_collection_modifyitems", tryfirst=True)
    def pytest_remember_written_order(self, items: list[pytest.Item]) -> None:
        self.written = {item.nodeid: index for index, item in enumerate(items)}

    @pytest.hookimpl(specname="pytest_collection_modifyitems", trylast=True)
    def pytest_regroup_modules(self, config: pytest.Config, items: list[pytest.Item]) -> None:
        if random_order_seed(config) is None:  # the written order, as asked
            return
        groups: dict[str, int] = {}
        modules: dict[str, int] = {}
        for item in items:  # in the shuffled order: each unit's first appearance is its place
            groups.setdefault(worker_group(item.nodeid), len(groups))
            modules.setdefault(item.nodeid.split("::", 1)[0], len(modules))
        items.sort(
            key=lambda item: (
                worker_group(item.nodeid) not in FIRST_OF_ALL,
                worker_group(item.nodeid) not in LONGEST_FIRST,
                groups[worker_group(item.nodeid)],
                modules[item.nodeid.split("::", 1)[0]],
                self.written.get(item.nodeid, 0),
            )
        )

    @pytest.hookimpl(trylast=True)
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        self._print_seed(session.config)

    def pytest_terminal_summary(self, config: pytest.Config) -> None:
        self._print_seed(config)

    @staticmethod
    def _print_seed(config: pytest.Config) -> None:
        seed = random_order_seed(config)
        reporter = config.pluginmanager.get_plugin("terminalreporter")
        if seed is None or reporter is None or hasattr(config, "workerinput"):
            return
        reporter.write_line(
            f"Modules in random order, seed {seed}: again with `PYTEST_SEED={seed} make test` "
            f"or `pytest -p random_order --random-order-bucket=module --random-order-seed={seed}`"
        )


# -- skips ---------------------------------------------------------------------------------


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    from django.conf import settings

    on_postgres = settings.DATABASES["default"]["ENGINE"].endswith("postgresql")
    for item in items:
        if item.get_closest_marker("postgres") and not on_postgres:
            item.add_marker(pytest.mark.skip(reason="needs PostgreSQL (set DATABASE_URL)"))


@dataclass(eq=False)  # a plugin object: pluggy keeps it in sets
class SkipPolicy:
    """Under CI=true every skip fails the run unless its node id is in `allowed`: skips at
    collection (a module-level `pytest.skip`/`importorskip`, seen only by
    pytest_collectreport), at setup or in the test (marked or not), and xfail/xpass alike.
    Tests deselected with `-m` are not reported at all, so they are not skips. Under xdist
    the controller sees every worker's reports (skipped collection reports included), so
    it alone decides."""

    allowed: dict[str, str]
    seen: list[tuple[str, str]] = field(default_factory=list)

    @staticmethod
    def _reason(report: pytest.CollectReport | pytest.TestReport) -> str:
        if hasattr(report, "wasxfail"):
            return f"xfail: {report.wasxfail}" if report.skipped else "xpass (marked xfail)"
        if isinstance(report.longrepr, tuple):  # (path, line, "Skipped: why")
            return str(report.longrepr[2])
        return str(report.longrepr)

    def _note(self, report: pytest.CollectReport | pytest.TestReport) -> None:
        if report.nodeid not in self.allowed:
            self.seen.append((report.nodeid, self._reason(report)))

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.skipped:
            self._note(report)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.skipped or hasattr(report, "wasxfail"):
            self._note(report)

    def _enforced(self, config: pytest.Config) -> bool:
        on_worker = hasattr(config, "workerinput")
        return not on_worker and os.environ.get("CI", "").lower() == "true" and bool(self.seen)

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if self._enforced(session.config):
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_terminal_summary(self, terminalreporter: Any, config: pytest.Config) -> None:
        if not self._enforced(config):
            return
        terminalreporter.write_sep(
            "=", "CI=true: skips not on ALLOWED_SKIPS fail the run", red=True
        )
        for nodeid, reason in self.seen:
            terminalreporter.write_line(f"{nodeid}: {reason}")
        terminalreporter.write_line(
            "Make them run, or add them with their reason to ALLOWED_SKIPS in tests/conftest.py."
        )


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(SkipPolicy(ALLOWED_SKIPS), "skip-policy")
    config.pluginmanager.register(ModuleOrder(), "module-order")


# -- no rows left behind -------------------------------------------------------------------
# Tables that post_migrate refills after every flush (a transactional test's teardown), with
# new ids: their rows are Django's, never a test's.
REFILLED_BY_DJANGO = frozenset({"django_content_type", "auth_permission"})


@dataclass
class _Baseline:
    counts: dict[str, int] | None = None


_baseline = _Baseline()


def row_counts() -> dict[str, int]:
    """Rows per table of the test database, in one query. The role groups (a data migration
    makes them; tests.factories.role_group remakes them after a flush) are not counted."""
    from django.db import connection

    tables = sorted(
        set(connection.introspection.django_table_names(only_existing=True)) - REFILLED_BY_DJANGO
    )
    selects: list[str] = []
    params: list[str] = []
    for table in tables:
        # Table names from Django's introspection, quoted: nothing from outside.
        select = f"SELECT %s, COUNT(*) FROM {connection.ops.quote_name(table)}"  # noqa: S608
        params.append(table)
        if table == "auth_group":
            select += f" WHERE name NOT IN ({', '.join(['%s'] * len(ROLES))})"
            params.extend(ROLES)
        selects.append(select)
    with connection.cursor() as cursor:
        cursor.execute(" UNION ALL ".join(selects), params)
        return {str(table): int(count) for table, count in cursor.fetchall()}


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup: None, django_db_blocker: Any) -> Iterator[None]:
    """pytest-django's, plus the state right after the migrations, which every module must
    leave the database in (or emptier: a transactional test's flush empties every table)."""
    with django_db_blocker.unblock():
        _baseline.counts = row_counts()
    yield


@pytest.fixture(scope="module", autouse=True)
def _module_leaves_no_rows(
    request: pytest.FixtureRequest, django_db_blocker: Any
) -> Iterator[None]:
    """Fail a module that leaves rows behind (committed by a module-scoped fixture, a live
    server or a worker process after the test's flush), then flush them, so every module
    starts from the database the migrations made, whatever ran before it in its process."""
    yield
    baseline = _baseline.counts
    if baseline is None:  # no test in this process has used the database yet
        return
    with django_db_blocker.unblock():
        left = {
            table: count - baseline.get(table, 0)
            for table, count in row_counts().items()
            if count > baseline.get(table, 0)
        }
        if left:
            from django.core.management import call_command

            call_command("flush", interactive=False, verbosity=0)
    if left:
        tables = ", ".join(f"{table} ({count})" for table, count in sorted(left.items()))
        pytest.fail(
            f"{request.node.nodeid} left rows behind in the test database: {tables}. "
            "Delete what the module commits outside a test's transaction (the database was "
            "flushed for the next module).",
            pytrace=False,
        )


@pytest.fixture(autouse=True)
def _fresh_rate_limits() -> Iterator[None]:
    """Rate-limit counters (bad tokens, the token endpoint) live in the "throttle" cache, in
    the process's memory under tests: each test starts with none, as it does with no failed
    sign-ins (those are rows, rolled back)."""
    from django.core.cache import caches

    caches["throttle"].clear()
    yield


@pytest.fixture
def make_user(db: None) -> Callable[..., User]:
    def make(username: str, *roles: str, superuser: bool = False) -> User:
        user = User.objects.create_user(username=username, password="pw-" + username)
        if superuser:
            user.is_superuser = True
            user.is_staff = True
            user.save()
        for role in roles:
            assert role in ROLES, role
            user.groups.add(role_group(role))
        return user

    return make


@pytest.fixture
def role_users(make_user: Callable[..., User]) -> dict[str, User]:
    """One user per role, plus `nobody` (authenticated, no role)."""
    users = {role: make_user(role, role) for role in ROLES}
    users["nobody"] = make_user("nobody")
    return users


@pytest.fixture
def api_client_for() -> Callable[[User | None], APIClient]:
    def make(user: User | None) -> APIClient:
        client = APIClient()
        if user is not None:
            client.force_authenticate(user=user)
        return client

    return make
