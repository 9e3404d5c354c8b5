"""Programs run with floating-point errors ignored, and leave the caller's error state as it was."""

import threading
import warnings

import numpy as np

import stablegrad as sg
from stablegrad.backends.numpy_program import quiet_errors, restore_errors


def _overflowing():
    x = sg.tensor("x", (3,), "float64")
    return sg.function([x], sg.exp(x) - sg.exp(x))  # inf - inf: overflow, then invalid


def test_a_call_warns_of_nothing_and_restores_the_callers_state():
    f = _overflowing()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with np.errstate(over="raise", invalid="warn"):
            # (written, inf - inf is NaN; the wide-range rescue evaluates it again: 0)
            assert f(np.array([1000.0, 0.0, 1.0]))[0] == 0.0
            assert np.geterr()["over"] == "raise" and np.geterr()["invalid"] == "warn"
            try:
                np.exp(np.array([1000.0]))
            except FloatingPointError:
                pass
            else:
                raise AssertionError("the caller's over='raise' was not restored")


def test_the_quiet_state_follows_the_state_it_replaces():
    with np.errstate(divide="raise"):
        token = quiet_errors()
        assert np.geterr() == {"divide": "ignore", "over": "ignore", "under": "ignore", "invalid": "ignore"}
        restore_errors(token)
        assert np.geterr()["divide"] == "raise"
    token = quiet_errors()  # another state replaced: built afresh, not the one above
    restore_errors(token)
    assert np.geterr()["divide"] != "raise"


def test_threads_calling_one_function_at_once():
    f = _overflowing()
    failures = []

    def work():
        try:
            for _ in range(200):
                with np.errstate(over="raise"):
                    f(np.array([1000.0, 0.0, 1.0]))
                    assert np.geterr()["over"] == "raise"
        except Exception as exc:  # pragma: no cover - the assertion below reports it
            failures.append(exc)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures
