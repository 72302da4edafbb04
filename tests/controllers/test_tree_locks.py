"""A delete never waits on a row another transaction holds (operations/tree_locks.py): it
gives way and tries again, so it can be in no deadlock; once the holder is done it deletes."""

from __future__ import annotations

import threading
import time

import psycopg
import pytest
from django.db import connection

from issuance.models import Certificate, CertificateRequest
from issuance.operations import actions
from tests.factories import make_certificate, make_selfsigned_issuer
from tests.helpers import drain

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def _other_connection() -> psycopg.Connection[tuple[object, ...]]:
    params = connection.get_connection_params()
    params.pop("cursor_factory", None)
    params.pop("context", None)
    return psycopg.connect(**params)


def test_a_held_request_row_makes_the_delete_give_way_then_finish() -> None:
    issuer = make_selfsigned_issuer()
    cert = make_certificate("held", issuer)
    drain()
    request_pk = CertificateRequest.objects.get(certificate=cert).pk
    holder = _other_connection()
    released = threading.Event()
    with holder.cursor() as cur:
        # The worker's pattern: a child row updated, its parent to be woken next.
        cur.execute(
            "SELECT id FROM issuance_certificaterequest WHERE id = %s FOR UPDATE", [request_pk]
        )

    def release_soon() -> None:
        time.sleep(0.5)
        holder.commit()
        released.set()

    threading.Thread(target=release_soon, daemon=True).start()
    started = time.monotonic()
    try:
        assert actions.delete_certificates(["held"], "tester") == {"held": ""}
    finally:
        released.wait(5)
        holder.close()
    # It deleted only once the holder was done, and did not wait on the lock itself: the
    # holder's lock was never queued behind (no deadlock could form).
    assert time.monotonic() - started >= 0.5
    assert not Certificate.objects.filter(name="held").exists()
    assert not CertificateRequest.objects.filter(pk=request_pk).exists()


def test_a_delete_that_never_gets_the_rows_says_busy_and_deletes_nothing() -> None:
    issuer = make_selfsigned_issuer()
    cert = make_certificate("busy", issuer)
    drain()
    holder = _other_connection()
    try:
        with holder.cursor() as cur:
            cur.execute("SELECT id FROM issuance_certificate WHERE id = %s FOR UPDATE", [cert.pk])
        with pytest.raises(actions.ActionError, match="busy, try again"):
            actions.delete_certificates(["busy"], "tester")
    finally:
        holder.rollback()
        holder.close()
    assert Certificate.objects.filter(name="busy").exists()
    assert CertificateRequest.objects.filter(certificate=cert).exists()
