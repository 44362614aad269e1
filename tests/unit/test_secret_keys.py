"""Sealing with AES-256-GCM, the tenant and the name as associated data, and the keys of
the environment and key files (pgsched/secret_keys.py)."""

from __future__ import annotations

import base64
import dataclasses
import os

import pytest

from pgsched.errors import ConfigError
from pgsched.secret_keys import Keyring, SecretUnreadable, from_environment, key_id


def _b64(key: bytes) -> str:
    return base64.b64encode(key).decode()


def test_a_value_opens_for_its_tenant_and_name_only():
    ring = Keyring([os.urandom(32)])
    sealed = ring.seal("acme", "db-url", "postgres://pw")
    assert b"postgres://pw" not in sealed.ciphertext and len(sealed.nonce) == 12
    assert sealed.key_id == ring.current_id and len(sealed.key_id) == 16
    assert ring.open("acme", "db-url", sealed) == "postgres://pw"
    for tenant, name in (("other", "db-url"), ("acme", "db-url2"), ("acm", "edb-url")):
        with pytest.raises(SecretUnreadable, match="does not open"):
            ring.open(tenant, name, sealed)
    flipped = bytes([sealed.ciphertext[0] ^ 1]) + sealed.ciphertext[1:]
    with pytest.raises(SecretUnreadable, match="altered"):
        ring.open("acme", "db-url", dataclasses.replace(sealed, ciphertext=flipped))
    assert ring.seal("acme", "db-url", "postgres://pw").nonce != sealed.nonce


def test_rotation_the_first_key_seals_every_key_opens():
    old, new = os.urandom(32), os.urandom(32)
    sealed_old = Keyring([old]).seal("t", "n", "v1")
    ring = Keyring([new, old])
    assert ring.open("t", "n", sealed_old) == "v1"
    assert ring.seal("t", "n", "v2").key_id == key_id(new)
    with pytest.raises(SecretUnreadable, match=f"key {key_id(old)}, which this process lacks"):
        Keyring([new]).open("t", "n", sealed_old)


def test_keys_from_the_environment_and_files(tmp_path):
    key = os.urandom(32)
    assert from_environment({}) is None
    assert from_environment({"PGSCHED_SECRET_KEY": _b64(key)}).current_id == key_id(key)
    second = os.urandom(32)
    path = tmp_path / "keys"
    path.write_text(f"# current first\n{_b64(second)}\n\n{_b64(key)}\n")
    ring = from_environment({"PGSCHED_SECRET_KEY_FILE": str(path)})
    assert ring.keys == [second, key]
    assert from_environment({"PGSCHED_SECRET_KEY": _b64(key)}, str(path)).keys == [second, key]
    with pytest.raises(ConfigError, match="not both"):
        from_environment({"PGSCHED_SECRET_KEY": _b64(key), "PGSCHED_SECRET_KEY_FILE": str(path)})
    with pytest.raises(ConfigError, match=r"PGSCHED_SECRET_KEY: a key must be 32 bytes .* has 16"):
        from_environment({"PGSCHED_SECRET_KEY": _b64(os.urandom(16))})
    with pytest.raises(ConfigError, match="must be base64"):
        from_environment({"PGSCHED_SECRET_KEY": "not base64!"})
    path.write_text(f"{_b64(key)}\nno!pe\n")
    with pytest.raises(ConfigError, match="line 2: a key must be base64"):
        from_environment({}, str(path))
    with pytest.raises(ConfigError, match="cannot be read"):
        from_environment({}, str(tmp_path / "absent"))
    path.write_text("# nothing\n")
    with pytest.raises(ConfigError, match="holds no key"):
        from_environment({}, str(path))
