"""pgsched.masking.restore: a mask sent back keeps the stored value, at any depth; what is not
a mask is taken as given."""

from pgsched.masking import MASK, MAX_DEPTH, restore


def test_a_mask_sent_back_keeps_the_stored_value_at_any_depth():
    stored = {"password": "s1", "jobs": [{"token": "s2", "n": 1}], "region": "eu"}
    sent = {"password": MASK, "jobs": [{"token": MASK, "n": 2}], "region": "us"}
    assert restore(sent, stored) == {
        "password": "s1",
        "jobs": [{"token": "s2", "n": 2}],
        "region": "us",
    }
    assert sent["password"] == MASK  # the argument is not changed


def test_a_new_value_a_removed_key_and_a_mask_with_nothing_stored_are_taken_as_given():
    stored = {"A": "old", "B": "gone"}
    assert restore({"A": "new", "C": MASK}, stored) == {"A": "new", "C": MASK}


def test_deeper_than_max_depth_is_taken_as_given_without_recursion_error():
    deep: object = MASK
    for _ in range(10_000):
        deep = [deep]
    out = restore(deep, [[["s"]]])  # no RecursionError; the mask 10,000 deep stays as sent
    for _ in range(10_000):
        assert isinstance(out, list) and len(out) == 1
        out = out[0]
    assert out == MASK
    shallow: object = MASK
    stored: object = "s"
    for _ in range(MAX_DEPTH - 1):
        shallow, stored = [shallow], [stored]
    assert restore(shallow, stored) == stored
