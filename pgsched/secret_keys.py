"""The keys that seal stored secrets, and the sealing: AES-256-GCM (``cryptography``'s
AEAD, NIST SP 800-38D) with the tenant and the secret's name bound as associated data.

The database never holds a key: it keeps each secret's ciphertext, its 12-byte nonce and
the id of the key that sealed it (migration 0029). The key lives with the processes that
seal and open secrets, the CLI's ``pgsched secret set`` and the workers
(docs/security.md, "Secrets"):

- ``PGSCHED_SECRET_KEY``: one key, 32 bytes in base64 (``openssl rand -base64 32``);
- ``PGSCHED_SECRET_KEY_FILE`` (or the CLI's ``--secret-key-file``): a file of such keys,
  one a line (``#`` comments and blank lines skipped). The first seals; every one opens.
  To rotate, put a new key on the first line, keep the old ones below, and ``pgsched
  secret set`` each secret again (or leave them: they open with the old key).

A key's id is derived from the key (:func:`key_id`: 16 hex digits of a SHA-256 of it), so a
file needs no names and a ciphertext says which key opens it without telling anything
about the key. Pure: no database.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
from collections.abc import Mapping
from dataclasses import dataclass

from .errors import ConfigError, PgschedError
from .secret_refs import KEY_ENV, KEY_FILE_ENV

KEY_BYTES = 32  # AES-256
NONCE_BYTES = 12  # GCM's 96-bit nonce (SP 800-38D, 8.2.2: random nonces, at most 2**32 per key)
MAX_KEY_FILE_BYTES = 64 * 1024
#: the most a secret's value may be (bytes of UTF-8): a password or a URL, not a data file
MAX_VALUE_BYTES = 64 * 1024


class SecretUnreadable(PgschedError):
    """A stored secret could not be opened: no key with its id, or the ciphertext does not
    authenticate under the key, the tenant and the name (moved, altered, another key)."""


@dataclass(frozen=True)
class Sealed:
    """A sealed value as it is stored: ``ciphertext`` (with GCM's 16-byte tag at its end),
    ``nonce`` (12 bytes) and ``key_id``."""

    ciphertext: bytes
    nonce: bytes
    key_id: str


def key_id(key: bytes) -> str:
    """The id of ``key``: 16 hex digits of SHA-256 over a label and the key."""
    return hashlib.sha256(b"pgsched secret key id\x00" + key).hexdigest()[:16]


def _associated(tenant: str, name: str) -> bytes:
    # the tenant and the name, unambiguously (neither may hold a NUL: both are checked names)
    return b"pgsched secret v1\x00" + tenant.encode() + b"\x00" + name.encode()


def _decode_key(text: str, where: str) -> bytes:
    try:
        key = base64.b64decode(text.strip(), validate=True)
    except (binascii.Error, ValueError):
        raise ConfigError(f"{where}: a key must be base64 (openssl rand -base64 32)") from None
    if len(key) != KEY_BYTES:
        raise ConfigError(
            f"{where}: a key must be {KEY_BYTES} bytes in base64 (it has {len(key)} bytes): "
            "openssl rand -base64 32"
        )
    return key


class Keyring:
    """The keys of one process: ``keys[0]`` seals, each opens what it sealed."""

    def __init__(self, keys: list[bytes]):
        if not keys:
            raise ConfigError("secret key: no key given")
        self.keys = list(keys)
        self._by_id = {key_id(k): k for k in keys}

    @property
    def ids(self) -> list[str]:
        """The ids of the keys, the sealing one first."""
        return [key_id(k) for k in self.keys]

    @property
    def current_id(self) -> str:
        """The id of the key that seals."""
        return key_id(self.keys[0])

    def seal(self, tenant: str, name: str, value: str) -> Sealed:
        """``value`` sealed for secret ``name`` of ``tenant`` with the current key and a
        fresh random nonce."""
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM  # 25 ms: when first used

        nonce = os.urandom(NONCE_BYTES)
        data = AESGCM(self.keys[0]).encrypt(nonce, value.encode(), _associated(tenant, name))
        return Sealed(data, nonce, self.current_id)

    def open(self, tenant: str, name: str, sealed: Sealed) -> str:
        """The value sealed for ``name`` of ``tenant``. Raises SecretUnreadable when no key
        has its id, or it does not authenticate (sealed for another tenant or name, or
        altered)."""
        from cryptography.exceptions import InvalidTag
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        key = self._by_id.get(sealed.key_id)
        if key is None:
            raise SecretUnreadable(
                f"secret {name!r}: sealed with key {sealed.key_id}, which this process lacks "
                f"(it has {', '.join(self._by_id)})"
            )
        try:
            data = AESGCM(key).decrypt(
                bytes(sealed.nonce), bytes(sealed.ciphertext), _associated(tenant, name)
            )
        except (InvalidTag, ValueError):
            raise SecretUnreadable(
                f"secret {name!r}: its ciphertext does not open under key {sealed.key_id} for "
                f"tenant {tenant!r} (altered, or sealed for another tenant or name)"
            ) from None
        return data.decode()


def parse_key_file(text: str, where: str) -> list[bytes]:
    """The keys of a key file's ``text`` (one base64 key a line; blank lines and ``#``
    comments skipped). Raises ConfigError naming ``where`` and the line."""
    keys = []
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if line and not line.startswith("#"):
            keys.append(_decode_key(line, f"{where}, line {number}"))
    if not keys:
        raise ConfigError(f"{where}: holds no key (one base64 key a line)")
    return keys


def read_key_file(path: str) -> list[bytes]:
    """The keys of the key file at ``path``. Raises ConfigError when it cannot be read or
    holds no valid key."""
    try:
        with open(path, "rb") as f:
            raw = f.read(MAX_KEY_FILE_BYTES + 1)
    except OSError as exc:
        raise ConfigError(f"secret key file: {path!r} cannot be read: {exc.strerror}") from None
    if len(raw) > MAX_KEY_FILE_BYTES:
        raise ConfigError(f"secret key file: {path!r} is over {MAX_KEY_FILE_BYTES} bytes")
    return parse_key_file(raw.decode("utf-8", errors="replace"), f"secret key file {path!r}")


def from_environment(environ: Mapping[str, str], key_file: str | None = None) -> Keyring | None:
    """The keyring given by ``key_file`` (a command-line option), else ``PGSCHED_SECRET_KEY``
    or ``PGSCHED_SECRET_KEY_FILE`` of ``environ`` (both at once is refused); None when no
    key is given. Raises ConfigError for a key that cannot be read or is not one."""
    if key_file is not None:
        return Keyring(read_key_file(key_file))
    inline, path = environ.get(KEY_ENV) or None, environ.get(KEY_FILE_ENV) or None
    if inline and path:
        raise ConfigError(f"secret key: give {KEY_ENV} or {KEY_FILE_ENV}, not both")
    if inline:
        return Keyring([_decode_key(inline, KEY_ENV)])
    if path:
        return Keyring(read_key_file(path))
    return None
