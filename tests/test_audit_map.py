"""The stability map: the audit drawn as heat maps, as written next to as recognised."""

from __future__ import annotations

import inspect
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

import stablegrad as sg
from stablegrad.audit import Cell, Row, picture

pytest.importorskip("mpmath")

ROOT = Path(__file__).resolve().parents[1]
SVG = "{http://www.w3.org/2000/svg}"


def naive_softplus(x):
    return sg.sum(sg.log(1 + sg.exp(x)))


def stable_softplus(x):
    return sg.sum(sg.softplus(x))


@pytest.fixture(scope="module")
def report():
    return sg.audit(naive_softplus, {"x": "float64[3]"}, dtypes=["float64", "float32"], recognition=False)


def _cells(svg_text: str) -> dict[str, str]:
    """tooltip → fill of every cell of the map."""
    root = ET.fromstring(svg_text)
    cells = {}
    for group in root.iter(f"{SVG}g"):
        rect = group.find(f"{SVG}rect")
        if rect is not None and rect.get("class") == "cell":
            cells[group.find(f"{SVG}title").text] = rect.get("fill")
    return cells


def test_the_map_shows_every_output_dtype_mode_and_scenario(report):
    cells = _cells(report.to_svg())
    scenarios = picture.scenarios([report, report.as_recognised()])
    # value and d/dx, per dtype, as written and as recognised
    assert len(cells) == 2 * 2 * 2 * len(scenarios)
    tip = next(t for t in cells if t.startswith("value · float64 · x ≈ +1e3 · as written"))
    assert cells[tip] == picture.NONFINITE and "inf/NaN" in tip
    tip = next(t for t in cells if t.startswith("value · float64 · x ≈ +1e3 · recognised"))
    assert cells[tip] != picture.NONFINITE and "worst relative error" in tip


def test_the_map_marks_what_a_dtype_does_not_have(report):
    cells = _cells(report.to_svg())
    # ±1e300 is not a float32 number: that scenario exists in float64 only
    tip = next(t for t in cells if t.startswith("value · float32 · x ≈ +1e300"))
    assert cells[tip] == picture.EMPTY and "not run" in tip


def test_without_compare_the_map_is_the_report_alone(report):
    cells = _cells(report.to_svg(compare=False))
    assert cells and all("· as written" in t for t in cells)


def test_a_model_recognition_leaves_alone_is_not_audited_twice():
    report = sg.audit(stable_softplus, {"x": "float64[3]"}, dtypes=["float64"])
    assert report.rewrites == []

    def must_not_run():
        raise AssertionError("the audit was rerun although recognition changes nothing")

    report.rerun = must_not_run
    page = report.to_html()
    assert "recognition finds nothing to rewrite" in page
    assert all("· recognised" in t for t in _cells(report.to_svg()))


def test_the_page_names_the_line_that_breaks_and_the_rewrite(report):
    page = report.to_html()
    line = inspect.getsourcelines(naive_softplus)[1] + 1
    assert f"test_audit_map.py:{line}" in page
    assert "softplus" in page and "As written</b>: unstable" in page and "As recognised</b>: stable" in page
    assert "<script" not in page and "http" not in page.replace("http://www.w3.org/2000/svg", "")


def test_the_page_escapes_what_it_shows():
    odd = sg.audit(naive_softplus, {"x": "float64[3]"}, dtypes=["float64"], recognition=False)
    odd.model = "<b>m&m</b>"
    page = odd.to_html()
    assert "&lt;b&gt;m&amp;m&lt;/b&gt;" in page and "<b>m&m</b>" not in page


def test_the_reports_pair_up_and_rerun_once(report):
    recognised = report.as_recognised()
    assert recognised.recognition and recognised.ok and not report.ok
    assert report.as_recognised() is recognised and recognised.as_written() is report
    assert report.as_written() is report


def test_a_report_not_made_by_audit_cannot_rerun(report):
    bare = sg.audit(naive_softplus, {"x": "float64[3]"}, dtypes=["float64"], recognition=False)
    bare.rerun = None
    with pytest.raises(ValueError, match="cannot rerun"):
        bare.as_recognised()
    assert "· recognised" not in bare.to_svg()  # the map then shows the report alone


@pytest.mark.parametrize(
    ("cell", "row_error", "fill", "text"),
    [
        (Cell(out_of_range=True, compared=3), None, picture.OUT_OF_RANGE, "range"),
        (Cell(nonfinite=2, compared=3, error=float("inf")), None, picture.NONFINITE, "inf/nan"),
        (Cell(compared=0, undefined=3), None, picture.EMPTY, "—"),
        (Cell(), "boom", picture.ROW_ERROR, "error"),
    ],
)
def test_each_kind_of_cell_has_its_colour(cell, row_error, fill, text):
    row = Row("float64", "s", [cell], error=row_error)
    s = picture.swatch(row, 0, 1e-9, "here")
    assert (s.fill, s.text) == (fill, text) and s.tip.startswith("here: ")


def test_colour_says_how_far_from_the_tolerance():
    def fill(error):
        return picture.swatch(Row("float64", "s", [Cell(error=error, compared=1, rtol=1e-9)]), 0, 1e-9, "").fill

    def darkness(colour):
        return -sum(int(colour[i : i + 2], 16) for i in (1, 3, 5))

    assert fill(0.0) == fill(1e-20) == picture._mix(picture.GREEN_DEEP, picture.GREEN_PALE, 0.0)
    assert darkness(fill(1e-16)) > darkness(fill(1e-12)) > darkness(fill(1e-9))
    # over the tolerance: orange, turning red as it gets worse, saturating at 10⁶ × rtol
    assert fill(2e-9) != fill(1e-5) != fill(1e-3)
    assert fill(1e-3) == fill(1.0) == picture._hex(picture.RED)


def test_plot_draws_one_panel_per_output(report):
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    fig = report.plot()
    assert [ax.get_title() for ax in fig.axes] == report.columns
    assert len(fig.axes[0].patches) == 2 * 2 * len(picture.scenarios([report, report.as_recognised()]))


def test_cli_writes_the_page_and_keeps_its_exit_code(tmp_path):
    page, image = tmp_path / "map.html", tmp_path / "map.svg"
    done = _audit_cli("--html", str(page), "--svg", str(image))
    assert done.returncode == 1, done.stderr  # unstable as written
    assert "naive_models.py:23" in page.read_text() and "As recognised</b>: stable" in page.read_text()
    ET.fromstring(image.read_text())  # a well-formed SVG document


def test_cli_says_when_it_cannot_write_the_page(tmp_path):
    done = _audit_cli("--html", str(tmp_path / "missing" / "map.html"))
    assert done.returncode == 2 and "cannot write the map" in done.stderr


def _audit_cli(*extra: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "stablegrad", "audit", "examples/naive_models.py:mixture_naive"]
    command += ["--input", "x=float64[4]", "--input", "log_w=float64[3]", "--no-recognition", *extra]
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120)


def _browser() -> tuple[str, str] | None:
    browser = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    driver = shutil.which("chromedriver")
    return (browser, driver) if browser and driver else None


@pytest.mark.skipif(_browser() is None, reason="no Chromium and chromedriver installed (CI installs them)")
def test_a_headless_browser_shows_the_map_without_console_errors(tmp_path):
    webdriver = pytest.importorskip("selenium.webdriver")
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By

    page = tmp_path / "map.html"
    assert _audit_cli("--html", str(page)).returncode == 1
    browser, driver = _browser()  # type: ignore[misc]
    options = webdriver.ChromeOptions()
    options.binary_location = browser
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1200,900"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    chrome = webdriver.Chrome(service=Service(driver), options=options)
    try:
        chrome.get(page.as_uri())
        figure = chrome.find_element(By.CSS_SELECTOR, "#map svg.stability-map")
        assert figure.is_displayed() and figure.size["width"] > 600 and figure.size["height"] > 300
        cells = chrome.find_elements(By.CSS_SELECTOR, "#map rect.cell")
        assert len(cells) > 100 and all(c.size["width"] > 40 for c in cells[:5])
        assert "Stability map" in chrome.title
        severe = [entry for entry in chrome.get_log("browser") if entry["level"] == "SEVERE"]
        assert severe == []
    finally:
        chrome.quit()
