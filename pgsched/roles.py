"""Who may do what in the web interface and the REST API, and what a tenant's database
login is for. Pure (no database)."""

from __future__ import annotations

from enum import StrEnum


class Role(StrEnum):
    """A web user's or an API token's role (``web_user.role``, ``api_token.role``), lowest
    first: each role may do what the ones before it may (:meth:`Principal.may
    <pgsched.web.credentials.Principal>`)."""

    VIEWER = "viewer"
    OPERATOR = "operator"
    ADMIN = "admin"


ROLES = tuple(r.value for r in Role)  # lowest first


class LoginPurpose(StrEnum):
    """What a tenant's PostgreSQL login is for (``tenant_role.purpose``): it is given the
    group role ``pgsched_<purpose>`` (migration 0018, docs/security.md)."""

    APP = "app"
    ENGINE = "engine"
    WEB = "web"
