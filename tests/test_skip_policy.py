"""The CI rule of tests/conftest.py: under CI=true every skip fails the run (at collection, at
setup, in the test, xfail too) unless it is on the allow-list; without CI=true skips pass.
Each case runs a small suite through pytester with tests.conftest.SkipPolicy registered."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.timeout(120)

CONFTEST = """
from tests.conftest import SkipPolicy

ALLOWED = {"test_allowed.py::test_sqlite_only": "the reason it may skip"}


def pytest_configure(config):
    config.pluginmanager.register(SkipPolicy(ALLOWED), "skip-policy")
"""

SUITES = {
    "collection": {
        "test_module_skip": """
            import pytest
            pytest.skip("no server here", allow_module_level=True)
            def test_never_collected(): pass
        """,
        "test_importorskip": """
            import pytest
            pytest.importorskip("a_module_that_is_not_installed")
            def test_never_collected(): pass
        """,
        "test_fine": "def test_runs(): pass",
    },
    "runtime": {
        "test_runtime": """
            import pytest
            def test_skips_inside():
                pytest.skip("the receiver did not start")
            @pytest.mark.skip(reason="marked off")
            def test_marked(): pass
            @pytest.fixture
            def server():
                pytest.skip("fixture found no server")
            def test_fixture_skips(server): pass
            @pytest.mark.xfail(reason="known to fail")
            def test_xfails(): assert False
            @pytest.mark.xfail(reason="known to fail, but passes")
            def test_xpasses(): pass
            def test_runs(): pass
        """,
    },
    "allowed": {
        "test_allowed": """
            import pytest
            def test_sqlite_only():
                pytest.skip("not SQLite")
            def test_runs(): pass
        """,
    },
    "deselected": {
        "test_marks": """
            import pytest
            @pytest.mark.slowish
            def test_deselected(): pass
            def test_runs(): pass
        """,
    },
}

OFFENDERS = {
    "collection": [
        "test_module_skip.py: Skipped: no server here",
        "test_importorskip.py: Skipped: could not import 'a_module_that_is_not_installed'",
    ],
    "runtime": [
        "test_runtime.py::test_skips_inside: Skipped: the receiver did not start",
        "test_runtime.py::test_marked: Skipped: marked off",
        "test_runtime.py::test_fixture_skips: Skipped: fixture found no server",
        "test_runtime.py::test_xfails: xfail: known to fail",
        "test_runtime.py::test_xpasses: xpass (marked xfail)",
    ],
}


def run(pytester: pytest.Pytester, suite: str, ci: str, *args: str) -> pytest.RunResult:
    pytester.makeconftest(CONFTEST)
    pytester.makeini("[pytest]\nmarkers =\n    slowish: deselected below\n")
    pytester.makepyfile(**{name: code for name, code in SUITES[suite].items()})
    # In-process: tests.conftest is already imported. pytest-django stays out of the inner
    # run (it would take over the outer run's database blocker).
    with pytest.MonkeyPatch.context() as env:
        env.setenv("CI", ci)
        return pytester.runpytest("-p", "no:django", "-p", "no:cacheprovider", *args)


@pytest.mark.parametrize("suite", ["collection", "runtime"])
def test_every_skip_fails_a_ci_run_and_is_listed_with_its_reason(
    pytester: pytest.Pytester, suite: str
) -> None:
    result = run(pytester, suite, "true")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*CI=true: skips not on ALLOWED_SKIPS fail the run*"])
    listed = result.stdout.str().split("fail the run", 1)[1]
    for line in OFFENDERS[suite]:
        assert line in listed, (line, listed)
    assert "test_runs" not in listed


@pytest.mark.parametrize("suite", ["collection", "runtime"])
def test_the_same_skips_pass_outside_ci(pytester: pytest.Pytester, suite: str) -> None:
    result = run(pytester, suite, "false")
    assert result.ret == pytest.ExitCode.OK
    assert "ALLOWED_SKIPS" not in result.stdout.str()


def test_an_allow_listed_skip_passes_a_ci_run(pytester: pytest.Pytester) -> None:
    result = run(pytester, "allowed", "true")
    result.assert_outcomes(passed=1, skipped=1)
    assert result.ret == pytest.ExitCode.OK
    assert "ALLOWED_SKIPS" not in result.stdout.str()


def test_tests_deselected_by_a_marker_are_not_skips(pytester: pytest.Pytester) -> None:
    result = run(pytester, "deselected", "true", "-m", "not slowish")
    result.assert_outcomes(passed=1, deselected=1)
    assert result.ret == pytest.ExitCode.OK


def test_every_allow_listed_skip_names_a_test_that_exists() -> None:
    """A stale entry (a test renamed or gone) would make the allow-list longer than it looks."""
    import importlib

    from tests.conftest import ALLOWED_SKIPS

    for nodeid, reason in ALLOWED_SKIPS.items():
        path, name = nodeid.split("::")
        module = importlib.import_module(path.removesuffix(".py").replace("/", "."))
        assert callable(getattr(module, name, None)), f"{nodeid} is not a test"
        assert reason.strip(), f"{nodeid} has no reason"
