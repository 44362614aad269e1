"""Error messages: what they show of a bad value."""

from __future__ import annotations

from pgsched.errors import ValidationError


def test_a_validation_error_names_the_field_and_shows_the_value():
    assert str(ValidationError("queue", "a b", "must be a name")) == "queue: 'a b' must be a name"


def test_a_huge_value_is_not_echoed_whole():
    tags = [f"t{i:05d}" for i in range(10_000)]
    message = str(ValidationError("tags", tags, "must be a list of at most 20 tags"))
    assert len(message) < 300 and message.startswith("tags: ['t00000'")
    assert message.endswith("characters) must be a list of at most 20 tags")
