"""Where a webhook may be POSTed: the guard against server-side request forgery (SSRF).

A webhook URL is given by a tenant (its alert webhook) or a task's owner (``on_failure``,
``on_dlq``, ``on_missed``) and the installation's own scheduler POSTs to it. Unguarded,
anyone who may set one could make the installation send requests to itself
(``http://127.0.0.1:5432/``), to the cloud's metadata service (``169.254.169.254``) or to
any address of the private network it runs in. So:

- at send time, authoritatively (:func:`resolve`): the host is resolved once and every
  address it resolves to must be public: not loopback, private (RFC 1918, fc00::/7,
  100.64/10 and the other special-purpose ranges), link-local (169.254/16, fe80::/10),
  unspecified, multicast nor reserved, nor one of those in IPv6 clothing (IPv4-mapped
  ``::ffff:a.b.c.d``, 6to4, NAT64 ``64:ff9b::/96``, Teredo). The connection then goes to
  the address that was checked, never to a second lookup's answer (DNS rebinding), and a
  redirect is never followed (:func:`pgsched.webhooks.post`).
- at set time (:func:`check_url`): a URL whose host is a literal address refused above
  (in any spelling the resolver takes: ``2130706433``, ``0x7f.1``), or that carries a user
  name or password, is refused with a ValidationError naming the field and the value. A
  name is not looked up then: its answer may change; the send-time check is the one that
  counts.
- an operator allows internal targets on purpose: ``pgsched --webhook-allow CIDR`` (any
  command; repeat it) or ``$PGSCHED_WEBHOOK_ALLOW`` (CIDRs separated by spaces or
  commas), read by every process that sets or sends webhooks. An address inside one of
  them is allowed whatever it is. Off by default.
"""

from __future__ import annotations

import ipaddress
import os
import socket
from collections.abc import Iterable
from urllib.parse import SplitResult

from .errors import ValidationError

ENV = "PGSCHED_WEBHOOK_ALLOW"
#: how a refused delivery's error starts (:func:`pgsched.webhooks.send_due` gives it up)
REFUSED = "Refused:"

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network

_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_allowed: tuple[Network, ...] | None = None  # set by allow(); None: from the environment


class Refused(Exception):
    """A webhook target the guard refuses: the message says which address and why."""


def parse_networks(values: Iterable[str], field: str = "webhook_allow") -> tuple[Network, ...]:
    """``values`` (CIDRs such as ``10.0.0.0/8``, or single addresses) as networks; else
    ValidationError naming ``field`` and the bad value."""
    networks = []
    for value in values:
        try:
            networks.append(ipaddress.ip_network(value.strip(), strict=True))
        except ValueError as exc:
            raise ValidationError(
                field, value, f"must be a network such as 10.0.0.0/8 or fd00::/8 ({exc})"
            ) from None
    return tuple(networks)


def allow(values: Iterable[str] | None) -> None:
    """Allow the networks ``values`` as webhook targets in this process (None: back to
    ``$PGSCHED_WEBHOOK_ALLOW``). Raises ValidationError on a bad one (nothing changes)."""
    global _allowed
    _allowed = None if values is None else parse_networks(values)


def allowed() -> tuple[Network, ...]:
    """The networks allowed in this process: :func:`allow`'s, else the environment's."""
    if _allowed is not None:
        return _allowed
    return parse_networks(os.environ.get(ENV, "").replace(",", " ").split(), ENV)


def _kind(ip: Address) -> str | None:
    """What makes ``ip`` no public address, or None when it is one."""
    if ip.is_loopback:
        return "loopback"
    if ip.is_link_local:
        return "link-local"
    if ip.is_unspecified:
        return "unspecified"
    if ip.is_multicast:
        return "multicast"
    if ip.is_reserved:
        return "reserved"
    if ip.is_private:
        return "private"
    if not ip.is_global:
        return "non-public"
    return None


def _embedded(ip: Address) -> list[ipaddress.IPv4Address]:
    """The IPv4 addresses an IPv6 address carries to (6to4, Teredo)."""
    if not isinstance(ip, ipaddress.IPv6Address):
        return []
    found = [ip.sixtofour] if ip.sixtofour else []
    if ip.teredo:
        found += list(ip.teredo)
    return found


def refusal(address: str, networks: tuple[Network, ...] | None = None) -> str | None:
    """Why ``address`` (a numeric IP, as a resolver gives it) may not be sent to, in a few
    words; None when it may: it is public, or inside ``networks`` (default:
    :func:`allowed`)."""
    networks = allowed() if networks is None else networks
    ip: Address = ipaddress.ip_address(address.split("%", 1)[0])  # fe80::1%eth0: no scope
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped:
        ip = ip.ipv4_mapped  # the IPv4 address it is
    elif ip in _NAT64:  # DNS64's answer for an IPv4 host: judged as that host
        ip = ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    for candidate in (ip, *_embedded(ip)):
        kind = _kind(candidate)
        if kind and not any(candidate in n for n in networks):
            return f"{candidate} is a {kind} address"
    return None


def _how(networks: tuple[Network, ...]) -> str:
    return (
        "an operator may allow it with --webhook-allow CIDR or "
        f"${ENV} ({'none allowed now' if not networks else 'not in the networks allowed'})"
    )


def resolve(host: str, port: int, networks: tuple[Network, ...] | None = None) -> tuple:
    """The socket address to connect to for ``host``:``port``: its first address, once
    every address it resolves to passed :func:`refusal`. Raises Refused (none is used
    then), or OSError when it does not resolve."""
    networks = allowed() if networks is None else networks
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    for *_, sockaddr in infos:
        why = refusal(str(sockaddr[0]), networks)
        if why:
            named = "" if why.startswith(host + " ") else f"{host!r} resolves to "
            raise Refused(f"{named}{why}; not sent ({_how(networks)})")
    return infos[0][4]


def check_url(field: str, url: str, parts: SplitResult) -> None:
    """Set time: refuse ``url`` (split as ``parts``) when it carries a user name or
    password, or its host is a literal address that :func:`refusal` refuses;
    ValidationError naming ``field`` and the value. A host name is not looked up."""
    if parts.username is not None or parts.password is not None:
        raise ValidationError(
            field, url, "must not carry a user name or password (put a token in its path)"
        )
    host = parts.hostname or ""
    try:  # a literal address in any spelling the resolver takes; no lookup
        infos = socket.getaddrinfo(host, None, flags=socket.AI_NUMERICHOST)
    except (OSError, UnicodeError):
        return  # a name: checked when it is sent to
    networks = allowed()
    for *_, sockaddr in infos:
        why = refusal(str(sockaddr[0]), networks)
        if why:
            raise ValidationError(
                field, url, f"is refused as a webhook target: {why} ({_how(networks)})"
            )
