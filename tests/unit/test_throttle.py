"""The sign-in throttle on a fake monotonic clock: limits per username and per address,
their windows, what a success and a withdrawn attempt take back, and its bounded memory."""

from __future__ import annotations

from pgsched.web.throttle import Attempt, Limit, SignInThrottle


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def throttle(clock: Clock, **kw) -> SignInThrottle:
    return SignInThrottle(Limit(5, 300.0), Limit(20, 60.0), clock=clock, **kw)


def test_five_failures_for_a_username_refuse_the_sixth_until_the_window_passes():
    clock = Clock()
    t = throttle(clock)
    for i in range(5):
        assert isinstance(t.attempt(f"10.0.0.{i}", "ada"), Attempt)
        clock.now += 10
    assert t.attempt("10.0.0.9", "ada") == 250  # the first failure (50 s ago) leaves in 250 s
    assert isinstance(t.attempt("10.0.0.9", "bob"), Attempt)  # another username is not held
    clock.now += 250
    assert isinstance(t.attempt("10.0.0.9", "ada"), Attempt)


def test_twenty_failures_from_an_address_refuse_it_whatever_the_username():
    clock = Clock()
    t = throttle(clock)
    for i in range(20):
        assert isinstance(t.attempt("10.0.0.1", f"user{i}"), Attempt)
    assert t.attempt("10.0.0.1", "someone-new") == 60
    assert t.address_wait("10.0.0.1") == 60
    assert t.address_wait("10.0.0.2") == 0
    clock.now += 59.5
    assert t.attempt("10.0.0.1", "x") == 1  # Retry-After is whole seconds, at least 1
    clock.now += 0.5
    assert isinstance(t.attempt("10.0.0.1", "x"), Attempt)


def test_a_success_takes_its_attempt_back_and_clears_the_username():
    clock = Clock()
    t = throttle(clock)
    for _ in range(4):
        t.attempt("10.0.0.1", "ada")
    ok = t.attempt("10.0.0.1", "ada")
    assert isinstance(ok, Attempt)
    ok.succeeded()
    for _ in range(5):  # the username starts afresh
        assert isinstance(t.attempt("10.0.0.2", "ada"), Attempt)
    assert isinstance(t.attempt("10.0.0.2", "ada"), int)


def test_an_attempt_withdrawn_unchecked_counts_against_its_address_not_its_username():
    clock = Clock()
    t = throttle(clock)
    for i in range(20):
        attempt = t.attempt(f"10.0.0.{i % 2}", "ada")
        assert isinstance(attempt, Attempt)
        attempt.withdrawn()  # hashing was busy: the password was never checked
    assert isinstance(t.attempt("10.0.0.7", "ada"), Attempt)  # ada is not held
    for _ in range(10):
        t.attempt("10.0.0.1", "").withdrawn()
    assert t.attempt("10.0.0.1", "bob") == 60  # the address sent 20: it is


def test_a_parallel_flood_is_counted_as_it_arrives_not_once_it_has_failed():
    t = throttle(Clock())
    let_through = [t.attempt("10.0.0.1", f"u{i}") for i in range(300)]  # none has ended yet
    assert sum(isinstance(a, Attempt) for a in let_through) == 20


def test_memory_is_bounded_when_an_attacker_rotates_usernames_and_addresses():
    clock = Clock()
    t = throttle(clock, max_keys=1000)
    for i in range(50_000):
        t.attempt(f"10.{i // 65536}.{i // 256 % 256}.{i % 256}", f"user-{i}")
        clock.now += 0.001
    assert t.remembered() == (1000, 1000)
    # the most recent failures are the ones remembered
    for _ in range(4):
        t.attempt("10.9.9.9", "user-49999")
    assert isinstance(t.attempt("10.9.9.9", "user-49999"), int)


def test_a_long_username_is_remembered_by_its_first_200_characters():
    clock = Clock()
    t = throttle(clock)
    for i in range(5):
        t.attempt(f"10.0.0.{i}", "a" * 200 + str(i))
    assert isinstance(t.attempt("10.0.0.9", "a" * 200), int)
