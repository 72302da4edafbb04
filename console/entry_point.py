"""`issuance-console`: the installed package's command (pyproject.toml, [project.scripts]).

Runs every management command (`serve`, `reconcile`, `migrate`, `certctl`, `apply`,
`cluster`, …) as `manage.py` does in a checkout, with the settings module preset, so an
operator who installed the wheel needs neither the checkout nor DJANGO_SETTINGS_MODULE.
`issuance-console --version` prints the installed package's version.
"""

from __future__ import annotations

import os
import sys
from importlib.metadata import PackageNotFoundError, version

DISTRIBUTION = "issuance-console"


def package_version() -> str:
    """The version from the package metadata (pyproject.toml's [project] version)."""
    try:
        return version(DISTRIBUTION)
    except PackageNotFoundError:  # a checkout that was never installed (not even -e)
        return "unknown (not installed)"


def main(argv: list[str] | None = None) -> None:
    args = list(sys.argv if argv is None else argv)
    if args[1:] == ["--version"]:
        # Django's own --version would print Django's version.
        sys.stdout.write(f"{DISTRIBUTION} {package_version()}\n")
        return
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
    from django.core.management import execute_from_command_line

    execute_from_command_line(args)
