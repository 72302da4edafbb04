"""`manage.py kube_connector`: run the Kubernetes connector on its own (without the worker).

The worker runs the same connector as a step when KUBE_CONNECTOR=1; use this command when
the worker runs elsewhere or the connector should be a separate process. Mirrored
requests are still signed by the worker's CertificateRequest controller.
"""

from __future__ import annotations

from argparse import ArgumentParser
from typing import Any

from django.core.management.base import BaseCommand, CommandError
from django.db import close_old_connections

from issuance.kubernetes.csr_connector import config
from issuance.kubernetes.csr_connector.connector import shared, shutdown
from issuance.worker.wakeup import local_wakeup


class Command(BaseCommand):
    help = "Mirror Kubernetes CSRs into the approval queue and write decisions back."

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument(
            "--interval", type=float, default=2.0, help="seconds between passes when idle"
        )
        parser.add_argument("--once", action="store_true", help="one pass, then exit")

    def handle(self, *args: Any, **options: Any) -> None:
        if not config.enabled():
            raise CommandError("the connector is off: set KUBE_CONNECTOR=1 (and KUBECONFIG)")
        if not config.signer_map():
            self.stderr.write("KUBE_SIGNER_NAMES is empty: no CSR will be mirrored")
        try:
            connector = shared()
            if options["once"]:
                if not connector.wait_listed(timeout=30):
                    raise CommandError("could not list CertificateSigningRequests within 30 s")
                connector.sync()
                return
            self.stdout.write(f"Kubernetes connector running (signers: {config.signer_map()})")
            while True:
                local_wakeup.clear()
                if not connector.sync():
                    close_old_connections()
                    local_wakeup.wait(options["interval"])
        except config.NotConfigured as exc:
            raise CommandError(str(exc)) from None
        except KeyboardInterrupt:
            pass
        finally:
            shutdown()
