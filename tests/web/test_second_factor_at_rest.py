"""The second factor at rest (issuance/models/secondfactor.py): the TOTP secret is encrypted
with KEY_ENCRYPTION_KEY and recovery codes are kept as keyed digests. The rows are read raw
(connection.cursor()), as a copy of the database would be, after a real enrolment through the
pages; the audit log, the sessions, django-axes' failures and the logs are searched too.

Migration 0020 (the plugins' clear rows moved over and back) is run for real.
"""

from __future__ import annotations

import logging
import re
import time
from base64 import b32decode, b32encode
from binascii import unhexlify
from collections.abc import Callable, Iterator

import pyotp
import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.test import Client
from pytest_django import Settings

from issuance.access import two_factor
from issuance.models import Event, RecoveryCode, RecoveryCodeSet, TOTPFactor
from issuance.models.secondfactor import recovery_code_digest

ADDRESS = "192.0.2.77"
# Every table that holds (or held) a factor, and the places a secret could leak into.
TABLES = (
    "issuance_totpfactor",
    "issuance_recoverycodeset",
    "issuance_recoverycode",
    "otp_totp_totpdevice",
    "otp_static_staticdevice",
    "otp_static_statictoken",
    "django_session",
    "issuance_event",
    "axes_accessattempt",
    "axes_accessfailurelog",
)


def raw_text(*tables: str) -> str:
    """Every value of every row of the tables, as text, read past the ORM."""
    values: list[str] = []
    with connection.cursor() as cursor:
        for table in tables:
            # Table names from the constant above, quoted.
            cursor.execute(f"SELECT * FROM {connection.ops.quote_name(table)}")  # noqa: S608
            values.extend(str(value) for row in cursor.fetchall() for value in row)
    return "\n".join(values).lower()


def code_forms(codes: list[str]) -> list[str]:
    """Each code as shown and as stored by the plugin before (no dash), lower case."""
    return [form for code in codes for form in (code.lower(), code.replace("-", "").lower())]


def secret_forms(key: bytes, codes: list[str]) -> list[str]:
    """The ways the secrets could be written: the key in hex and base32, and the codes."""
    return [key.hex(), b32encode(key).decode().rstrip("=").lower(), *code_forms(codes)]


def enrol_through_the_pages(client: Client) -> tuple[bytes, list[str]]:
    """Sets up a factor as a user does: the key typed from the set-up page, a code from the
    "app", the recovery codes read off the page that shows them once."""
    page = client.get("/account/two-factor/setup/").content.decode()
    shown = re.search(r'<code class="secret" id="manual-key">([A-Z2-7 ]+)</code>', page)
    assert shown is not None
    typed = shown.group(1).replace(" ", "")
    done = client.post("/account/two-factor/setup/", {"code": pyotp.TOTP(typed).now(), "next": "/"})
    assert done.status_code == 302, done.content.decode()[:2000]
    # Between the POST and the page, the codes wait in the session (a database row): sealed.
    stored = raw_text("django_session")
    codes_page = client.get(done["Location"]).content.decode()
    codes = re.findall(r'<code class="secret">([a-z2-7]{5}-[a-z2-7]{5})</code>', codes_page)
    assert len(codes) == two_factor.RECOVERY_CODE_COUNT
    for form in code_forms(codes):
        assert form not in stored
    return b32decode(typed + "=" * (-len(typed) % 8)), codes


@pytest.fixture
def everything_logged(caplog: pytest.LogCaptureFixture) -> Iterator[pytest.LogCaptureFixture]:
    caplog.set_level(logging.DEBUG)
    yield caplog


@pytest.mark.django_db
def test_no_secret_is_stored_readable(
    make_user: Callable[..., User], everything_logged: pytest.LogCaptureFixture
) -> None:
    make_user("root", "admin")
    client = Client(REMOTE_ADDR=ADDRESS)
    assert client.post("/login/", {"username": "root", "password": "pw-root"}).status_code == 302
    key, codes = enrol_through_the_pages(client)
    assert len(key) == 20

    # A wrong recovery code (nearly a real one) and a right one, then the same one again.
    again = Client(REMOTE_ADDR=ADDRESS)
    assert again.post("/login/", {"username": "root", "password": "pw-root"}).status_code == 302
    near = codes[1][:-1] + ("a" if codes[1][-1] != "a" else "b")
    assert again.post("/login/verify/", {"code": near, "next": "/"}).status_code == 400
    assert again.post("/login/verify/", {"code": codes[1], "next": "/"})["Location"] == "/"
    third = Client(REMOTE_ADDR=ADDRESS)
    assert third.post("/login/", {"username": "root", "password": "pw-root"}).status_code == 302
    assert third.post("/login/verify/", {"code": codes[1], "next": "/"}).status_code == 400
    # New codes (the old ones stop working).
    fresh_page = client.post("/account/two-factor/recovery-codes/new/", follow=True)
    fresh = re.findall(
        r'<code class="secret">([a-z2-7]{5}-[a-z2-7]{5})</code>', fresh_page.content.decode()
    )
    assert len(fresh) == two_factor.RECOVERY_CODE_COUNT

    forms = secret_forms(key, codes + fresh + [near])
    stored = raw_text(*TABLES)
    for form in forms:
        assert form not in stored, "a secret is stored readable"
    events = "\n".join(str(value) for row in Event.objects.values_list() for value in row).lower()
    assert two_factor.RECOVERY_CODE_USED.lower() in events  # the audit log has the use...
    for form in forms:
        assert form not in events  # ...never the code
        assert form not in everything_logged.text.lower()

    # What is stored instead: a Fernet token for the key, 64 hex digits for each code.
    with connection.cursor() as cursor:
        cursor.execute("SELECT key_ciphertext FROM issuance_totpfactor")
        (ciphertext,) = cursor.fetchone()
        cursor.execute("SELECT digest FROM issuance_recoverycode")
        digests = [row[0] for row in cursor.fetchall()]
    assert ciphertext.startswith("gAAAAA")  # Fernet's version byte, base64
    assert len(digests) == two_factor.RECOVERY_CODE_COUNT
    assert all(re.fullmatch(r"[0-9a-f]{64}", d) for d in digests)
    assert recovery_code_digest(fresh[0].replace("-", "")) in digests


@pytest.mark.django_db
def test_the_encrypted_key_still_gives_codes(make_user: Callable[..., User]) -> None:
    user = make_user("otto", "viewer")
    device = TOTPFactor.objects.create(user=user, name="app", confirmed=True)
    codes = two_factor.new_recovery_codes(user)
    app = pyotp.TOTP(b32encode(device.bin_key).decode())
    assert device.key_ciphertext and device.bin_key.hex() not in device.key_ciphertext
    # The app's code now is taken once; the same code again is refused (replay).
    code = app.at(time.time())
    assert two_factor.verify(user, code) is not None
    assert two_factor.verify(user, code) is None
    assert two_factor.verify(user, "000000" if code != "000000" else "111111") is None
    # The QR code's URL carries the decrypted secret (the set-up page's only other use).
    assert f"secret={b32encode(device.bin_key).decode()}&" in device.config_url
    # A recovery code, typed with or without its dash, in either case, once.
    taken = two_factor.verify(user, codes[0].upper())
    assert taken is not None and taken[0] == "recovery"
    assert two_factor.verify(user, codes[0]) is None
    assert RecoveryCode.objects.filter(device__user=user).count() == len(codes) - 1
    assert two_factor.verify(user, codes[1].replace("-", "")) is not None
    assert two_factor.recovery_codes_left(user) == len(codes) - 2


@pytest.mark.django_db
def test_codes_made_under_a_rotated_key_still_work(
    make_user: Callable[..., User], settings: Settings
) -> None:
    """KEY_ENCRYPTION_KEY rotation (a new key first, the old one after): the stored secret
    decrypts and the recovery codes' digests still match."""
    from cryptography.fernet import Fernet

    user = make_user("rita", "viewer")
    device = TOTPFactor.objects.create(user=user, name="app", confirmed=True)
    key = device.bin_key
    codes = two_factor.new_recovery_codes(user)
    old = settings.KEY_ENCRYPTION_KEY
    settings.KEY_ENCRYPTION_KEY = f"{Fernet.generate_key().decode()},{old}"
    assert TOTPFactor.objects.get(pk=device.pk).bin_key == key
    assert two_factor.verify(user, codes[0]) is not None
    # Without the old key, nothing matches (the digests are keyed).
    settings.KEY_ENCRYPTION_KEY = Fernet.generate_key().decode()
    assert not RecoveryCodeSet.objects.get(user=user).verify_token(codes[1].replace("-", ""))


# -- migration 0020 ---------------------------------------------------------------------------

BEFORE = [("issuance", "0019_password_change_required")]
# The plugins' state too (0019 does not depend on them; 0020 does).
PLUGINS = [("otp_totp", "0003_add_timestamps"), ("otp_static", "0003_add_timestamps")]
AFTER = [("issuance", "0020_second_factor_at_rest")]
CLEAR_KEY = "3132333435363738393031323334353637383930"  # RFC 6238's test secret, hex


def _migrate(targets: list[tuple[str, str]]) -> MigrationExecutor:
    executor = MigrationExecutor(connection)
    executor.migrate(targets)
    return MigrationExecutor(connection)  # a fresh loader sees what is applied now


@pytest.mark.django_db(transaction=True)
def test_migration_0020_moves_clear_rows_and_back() -> None:
    leaf = MigrationExecutor(connection).loader.graph.leaf_nodes("issuance")
    try:
        old_apps = _migrate(BEFORE).loader.project_state(BEFORE + PLUGINS).apps
        user = old_apps.get_model("auth", "User").objects.create(username="mig")
        old_apps.get_model("otp_totp", "TOTPDevice").objects.create(
            user=user, name="app", confirmed=True, key=CLEAR_KEY, last_t=7, drift=1
        )
        static = old_apps.get_model("otp_static", "StaticDevice").objects.create(
            user=user, name="Recovery codes", confirmed=True
        )
        token_model = old_apps.get_model("otp_static", "StaticToken")
        for token in ("abcdefghij", "klmno-pqrst"):
            token_model.objects.create(device=static, token=token)

        _migrate(AFTER)
        stored = raw_text(*TABLES)
        for form in (CLEAR_KEY, "abcdefghij", "klmnopqrst", "klmno-pqrst"):
            assert form not in stored
        factor = TOTPFactor.objects.get(user_id=user.pk)
        assert (factor.confirmed, factor.last_t, factor.drift) == (True, 7, 1)
        assert factor.bin_key == unhexlify(CLEAR_KEY)
        mig = User.objects.get(pk=user.pk)
        code = pyotp.TOTP(b32encode(unhexlify(CLEAR_KEY)).decode()).at(time.time())
        assert two_factor.verify(mig, code) is not None
        assert two_factor.recovery_codes_left(mig) == 2
        assert two_factor.verify(mig, "KLMNO-PQRST") is not None
        assert two_factor.verify(mig, "abcde-fghij") is not None
        assert two_factor.verify(mig, "abcde-fghij") is None

        last_t = TOTPFactor.objects.get(pk=factor.pk).last_t  # the step of the code taken
        assert last_t > 7
        # Back: the secret returns to the plugin (decrypted); recovery codes cannot.
        old_apps = _migrate(BEFORE).loader.project_state(BEFORE + PLUGINS).apps
        back = old_apps.get_model("otp_totp", "TOTPDevice").objects.get(user_id=user.pk)
        assert (back.key, back.last_t, back.confirmed) == (CLEAR_KEY, last_t, True)
        assert not old_apps.get_model("otp_static", "StaticToken").objects.exists()
    finally:
        _migrate(leaf)
