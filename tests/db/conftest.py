"""Fixtures of the database tests shared by several modules."""

from __future__ import annotations

import pytest

from ..tenancy import two_tenants


@pytest.fixture
def ab(dsn):
    """Tenants A and B with real roles (tests/tenancy.py ``two_tenants``): ``(a, b, made)``."""
    with two_tenants(dsn) as (a, b, made):
        yield a, b, made
