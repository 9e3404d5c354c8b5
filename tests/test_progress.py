"""Progress output: a line rewritten in place on a terminal, silence elsewhere and for quick work."""

import io
import time

from stablegrad.progress import Bar, Stages


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_bar_fills_in_place_on_a_terminal_and_clears_its_line():
    stream = Terminal()
    bar = Bar(total=4, stream=stream, width=8)
    bar("first")
    bar("second")
    bar.close()
    frames = stream.getvalue().split("\r")
    assert frames[1].startswith("[##......] 1/4 first") and frames[2].startswith("[####....] 2/4 second")
    assert frames[-1] == "" and frames[-2].strip() == ""  # blanked, then back to the line's start


def test_a_bar_writes_nothing_to_a_stream_that_is_not_a_terminal():
    stream = io.StringIO()
    bar = Bar(total=2, stream=stream)
    bar.show(1, "half")
    bar.close()
    assert stream.getvalue() == ""


def test_a_bar_waits_out_its_delay():
    stream = Terminal()
    bar = Bar(total=2, stream=stream, delay=60.0)
    bar("quick")
    bar.close()
    assert stream.getvalue() == ""


def test_stages_show_the_current_stage_once_the_work_is_slow():
    stream = Terminal()
    with Stages("compiling f", stream=stream, delay=0.05, every=0.01) as stages:
        stages.stage("rewrites")
        time.sleep(0.3)
    text = stream.getvalue()
    assert "compiling f: rewrites" in text and " s" in text
    assert text.endswith("\r") and text.split("\r")[-2].strip() == ""  # the line is cleared at the end


def test_stages_are_silent_for_quick_work_and_off_a_terminal():
    quick = Terminal()
    with Stages("compiling f", stream=quick, delay=5.0) as stages:
        stages.stage("rewrites")
    elsewhere = io.StringIO()
    with Stages("compiling f", stream=elsewhere, delay=0.0, every=0.01):
        time.sleep(0.05)
    assert quick.getvalue() == "" and elsewhere.getvalue() == ""


def test_a_slow_compile_shows_its_stage_on_a_terminal(monkeypatch):
    import numpy as np

    import stablegrad as sg
    from stablegrad.compile import function as compile_function

    def slow_optimize(*args, **kwargs):
        time.sleep(0.3)
        return optimize(*args, **kwargs)

    optimize = compile_function.optimize
    terminal = Terminal()
    monkeypatch.setattr(compile_function, "optimize", slow_optimize)
    monkeypatch.setattr(compile_function, "SLOW", 0.05)
    monkeypatch.setattr("sys.stderr", terminal)
    x = sg.vector("x")
    f = sg.function([x], sg.sum(sg.exp(x)))
    assert "sg.function: compiling (backend='numpy'): recognition and rewrites" in terminal.getvalue()
    assert float(f(np.zeros(2))) == 2.0
