from __future__ import annotations

from broker_core.login_throttle import LoginThrottle, ThrottleSettings

SETTINGS = ThrottleSettings(
    free_failures=3, delay_s=1.0, max_delay_s=8.0, forget_after_s=100.0, max_tracked=4
)


def fail(throttle: LoginThrottle, times: int, now: float, user: str = "u", addr: str = "a") -> None:
    for _ in range(times):
        throttle.failed(user, addr, now)


def test_free_failures_then_a_doubling_delay() -> None:
    throttle = LoginThrottle(SETTINGS)
    fail(throttle, 2, 0.0)
    assert throttle.admit("u", "a", 0.0, 10.0) == 0.0
    fail(throttle, 1, 0.0)  # 3 failures: the 4th attempt waits 1 s
    assert throttle.admit("u", "a", 0.0, 10.0) == 1.0
    fail(throttle, 1, 1.0)  # 4 failures: 2 s after the last one
    assert throttle.admit("u", "a", 1.5, 10.0) == 1.5
    fail(throttle, 10, 3.0)  # capped at max_delay_s
    assert throttle.admit("u", "a", 3.0, 100.0) == 8.0
    assert throttle.failures == 14


def test_attempts_arriving_together_are_spaced_and_past_the_budget_refused() -> None:
    throttle = LoginThrottle(SETTINGS)
    fail(throttle, 3, 0.0)
    waits = [throttle.admit("u", "a", 0.0, 3.5) for _ in range(5)]
    assert waits == [1.0, 2.0, 3.0, None, None]
    assert (throttle.delayed, throttle.refused) == (3, 2)


def test_the_keys_are_user_and_address_apart() -> None:
    throttle = LoginThrottle(SETTINGS)
    fail(throttle, 3, 0.0, user="victim", addr="guesser")
    assert throttle.admit("other", "elsewhere", 0.0, 10.0) == 0.0
    assert throttle.admit("victim", "elsewhere", 0.0, 10.0) == 1.0  # the user name
    assert throttle.admit("other", "guesser", 0.0, 10.0) == 1.0  # the address
    assert throttle.admit(None, "guesser", 0.0, 10.0) == 2.0


def test_success_clears_the_user_not_the_address() -> None:
    throttle = LoginThrottle(SETTINGS)
    fail(throttle, 3, 0.0)
    throttle.succeeded("u")
    assert throttle.admit("u", "b", 0.0, 10.0) == 0.0
    assert throttle.admit("v", "a", 0.0, 10.0) == 1.0


def test_failures_are_forgotten_and_the_table_is_bounded() -> None:
    throttle = LoginThrottle(SETTINGS)
    fail(throttle, 3, 0.0)
    assert throttle.admit("u", "a", 101.0, 10.0) == 0.0
    assert len(throttle) == 0
    for n in range(10):
        throttle.failed(f"user{n}", f"addr{n}", 200.0)
    assert len(throttle) == 4  # the least recently failed went first
