"""Which addresses a webhook may go to (:mod:`pgsched.webhook_targets`), without a network:
the kinds refused, their IPv6 disguises, the operator's allowed networks, and what is
refused when a URL is set."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from pgsched import webhook_targets
from pgsched.alerts import check_webhook_url
from pgsched.errors import ValidationError


@pytest.fixture(autouse=True)
def _default() -> Iterator[None]:
    webhook_targets.allow(None)
    yield
    webhook_targets.allow(None)


@pytest.mark.parametrize(
    ("address", "kind"),
    [
        ("127.0.0.1", "127.0.0.1 is a loopback"),
        ("127.8.9.10", "loopback"),
        ("::1", "loopback"),
        ("10.0.0.1", "private"),
        ("172.16.5.4", "private"),
        ("192.168.1.1", "private"),
        ("fc00::1", "private"),
        ("fd12:3456::1", "private"),
        ("169.254.169.254", "link-local"),  # the cloud's metadata service
        ("fe80::1%eth0", "link-local"),
        ("0.0.0.0", "unspecified"),
        ("::", "unspecified"),
        ("224.0.0.1", "multicast"),
        ("239.255.255.250", "multicast"),
        ("ff02::1", "multicast"),
        ("240.0.0.1", "reserved"),
        ("100.64.0.1", "non-public"),  # carrier-grade NAT, shared address space
        ("::ffff:127.0.0.1", "127.0.0.1 is a loopback"),  # IPv4-mapped
        ("::ffff:169.254.169.254", "169.254.169.254 is a link-local"),
        ("64:ff9b::a9fe:a9fe", "169.254.169.254 is a link-local"),  # NAT64 (DNS64)
        ("2002:7f00:1::", "127.0.0.1 is a loopback"),  # 6to4
    ],
)
def test_non_public_addresses_are_refused_with_their_kind(address: str, kind: str) -> None:
    why = webhook_targets.refusal(address)
    assert why is not None and kind in why, why


@pytest.mark.parametrize(
    "address", ["93.184.215.14", "8.8.8.8", "2606:4700:4700::1111", "64:ff9b::808:808"]
)
def test_public_addresses_may_be_sent_to(address: str) -> None:
    assert webhook_targets.refusal(address) is None


def test_the_operators_networks_are_allowed_and_nothing_else(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(webhook_targets.ENV, "10.0.0.0/8, fd00::/8")
    assert webhook_targets.refusal("10.9.9.9") is None
    assert webhook_targets.refusal("::ffff:10.9.9.9") is None  # the same IPv4 address
    assert webhook_targets.refusal("fd00::5") is None
    assert "private" in (webhook_targets.refusal("192.168.0.1") or "")
    webhook_targets.allow(["127.0.0.1"])  # a process's --webhook-allow wins over the env
    assert webhook_targets.refusal("127.0.0.1") is None
    assert webhook_targets.refusal("10.9.9.9") is not None
    monkeypatch.setenv(webhook_targets.ENV, "10.0.0.0/33")
    webhook_targets.allow(None)
    with pytest.raises(ValidationError, match=r"PGSCHED_WEBHOOK_ALLOW: '10.0.0.0/33'"):
        webhook_targets.allowed()
    with pytest.raises(ValidationError, match=r"webhook_allow: '10.0.0.1/8'"):
        webhook_targets.allow(["10.0.0.1/8"])  # host bits set: did it mean /32?


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:8080/hook",
        "http://2130706433/",  # 127.0.0.1 as one number
        "http://0x7f.1/",
        "http://127.1/",
        "https://[::1]/hook",
        "https://[::ffff:7f00:1]/hook",
        "http://169.254.169.254/latest/meta-data/",
        "http://10.0.0.5/",
        "http://[fd00::1]/",
        "http://0.0.0.0:5432/",
    ],
)
def test_a_literal_internal_address_is_refused_when_set(url: str) -> None:
    with pytest.raises(ValidationError, match=r"on_failure:.*is refused as a webhook target"):
        check_webhook_url("on_failure", url)


@pytest.mark.parametrize(
    "url", ["https://user:pw@hooks.example.com/x", "https://token@hooks.example.com/x"]
)
def test_credentials_in_the_url_are_refused_when_set(url: str) -> None:
    with pytest.raises(ValidationError, match=r"on_dlq:.*user name or password"):
        check_webhook_url("on_dlq", url)


def test_a_name_or_a_public_or_allowed_address_passes_when_set() -> None:
    for url in ("https://hooks.example.com/x", "http://localhost:1/", "https://8.8.8.8/x"):
        assert check_webhook_url("on_missed", url) == url  # a name is checked when sent to
    webhook_targets.allow(["10.0.0.0/8"])
    assert check_webhook_url("on_missed", "http://10.0.0.5/") == "http://10.0.0.5/"
