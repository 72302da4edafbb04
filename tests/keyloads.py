"""Count private-key decryptions and parses per reconcile pass (for the key-loading tests).

`KeyLoads.watch(monkeypatch)` wraps, for one test:

- cryptography's `load_pem_private_key` (every parse, with its `unsafe_skip_rsa_key_validation`),
- the Fernet used by `issuance.pki.encryption` (every decryption whose plaintext is a PEM
  private key),
- each controller's `reconcile` in the worker's registry, so every parse and decryption is
  labelled with the pass it happened in (None: outside any pass, e.g. an API call).

A key is identified by its public key (so the same key stored twice, in the Secret and as
the next key, counts as one).
"""

from __future__ import annotations

import hashlib
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from itertools import count
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.types import PrivateKeyTypes
from django.db.models import Model

from issuance.controllers import registry
from issuance.controllers.base import Result
from issuance.pki import encryption


def key_id(pem: str | bytes) -> bytes:
    """The public key of a PEM private key (parsed the fast way, unrecorded)."""
    data = pem.encode() if isinstance(pem, str) else pem
    key = _original_load(data, password=None, unsafe_skip_rsa_key_validation=True)
    return public_der(key)


def public_der(key: PrivateKeyTypes) -> bytes:
    """The key's SubjectPublicKeyInfo DER, as `issuance.pki.keys.public_key_bytes` makes it,
    for any key cryptography parses (a parse is recorded before the caller rejects a type)."""
    return key.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )


_original_load = serialization.load_pem_private_key


@dataclass(frozen=True)
class Load:
    pass_label: str | None  # "controller:pk:n" (n: the pass's number), None outside a pass
    key: bytes  # the key's public key (DER)
    checked: bool  # parsed with OpenSSL's full RSA check


@dataclass
class KeyLoads:
    parses: list[Load] = field(default_factory=list)
    decryptions: list[Load] = field(default_factory=list)
    passes: list[str] = field(default_factory=list)
    _local: threading.local = field(default_factory=threading.local)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _numbers: Iterator[int] = field(default_factory=lambda: count(1))  # one per pass, all workers

    @classmethod
    def watch(cls, monkeypatch: pytest.MonkeyPatch) -> KeyLoads:
        loads = cls()
        monkeypatch.setattr(serialization, "load_pem_private_key", loads._load)
        original_fernet = encryption._fernet
        monkeypatch.setattr(
            encryption, "_fernet", lambda keys: _CountingFernet(original_fernet(keys), loads)
        )
        original_controllers = registry.controllers
        monkeypatch.setattr(
            registry,
            "controllers",
            lambda: [replace(c, reconcile=loads._labelled(c)) for c in original_controllers()],
        )
        return loads

    # -- recording -----------------------------------------------------------------
    def _label(self) -> str | None:
        return getattr(self._local, "label", None)

    def _load(self, data: bytes, password: bytes | None = None, **kwargs: Any) -> PrivateKeyTypes:
        key = _original_load(data, password, **kwargs)
        checked = not kwargs.get("unsafe_skip_rsa_key_validation", False)
        public = public_der(key)
        with self._lock:
            self.parses.append(Load(self._label(), public, checked))
        return key

    def _decrypted(self, plaintext: bytes) -> None:
        if b"PRIVATE KEY-----" not in plaintext:
            return  # an Opaque Secret's data (EAB or TSIG keys), not a private key
        try:
            key = key_id(plaintext)
        except ValueError:  # a stored key that does not parse: identified by its text
            key = b"unparsable:" + hashlib.sha256(plaintext).digest()
        with self._lock:
            self.decryptions.append(Load(self._label(), key, False))

    def _labelled(self, ctrl: registry.Controller) -> Callable[[Model], Result]:
        def reconcile(obj: Model) -> Result:
            label = f"{ctrl.name}:{obj.pk}:{next(self._numbers)}"
            with self._lock:
                self.passes.append(label)
            self._local.label = label
            try:
                return ctrl.reconcile(obj)
            finally:
                self._local.label = None

        return reconcile

    # -- questions -----------------------------------------------------------------
    def in_passes(self, loads: list[Load]) -> list[Load]:
        return [load for load in loads if load.pass_label is not None]

    def most_per_pass(self, key: bytes) -> tuple[int, int]:
        """(parses, decryptions) of `key` in the pass that did most of each."""
        parses = Counter(p.pass_label for p in self.in_passes(self.parses) if p.key == key)
        decrypts = Counter(d.pass_label for d in self.in_passes(self.decryptions) if d.key == key)
        return max(parses.values(), default=0), max(decrypts.values(), default=0)

    def passes_loading(self, key: bytes) -> set[str]:
        """The passes that decrypted or parsed `key`."""
        loads = self.in_passes(self.parses) + self.in_passes(self.decryptions)
        return {str(load.pass_label) for load in loads if load.key == key}

    def over_once(self) -> dict[tuple[str, bytes], int]:
        """Every (pass, key) decrypted or parsed more than once, with the higher count."""
        out: dict[tuple[str, bytes], int] = {}
        for loads in (self.parses, self.decryptions):
            counts = Counter((str(x.pass_label), x.key) for x in self.in_passes(loads))
            for where, n in counts.items():
                if n > 1:
                    out[where] = max(n, out.get(where, 0))
        return out

    def checked_in_passes(self) -> list[Load]:
        """Parses inside reconcile passes that ran OpenSSL's full RSA check (want none)."""
        return [p for p in self.in_passes(self.parses) if p.checked]


class _CountingFernet:
    def __init__(self, inner: Any, loads: KeyLoads) -> None:
        self._inner = inner
        self._loads = loads

    def encrypt(self, data: bytes) -> bytes:
        return bytes(self._inner.encrypt(data))

    def decrypt(self, token: bytes) -> bytes:
        plaintext = bytes(self._inner.decrypt(token))
        self._loads._decrypted(plaintext)
        return plaintext
