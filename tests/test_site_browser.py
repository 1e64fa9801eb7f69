"""The explorer page (site/explorer.html) in a real headless browser: Debian's Chromium driven by selenium.

The page re-implements diffattn.pure.trials.try_setting in JavaScript; these tests hold it to Python's numbers: on the
reference grid (to 1e-9), after each slider moves, and on bad input (clamped or refused with a visible message, never
NaN). Without Chromium they skip with one line saying how to get it (`make browser-deps` as root on Debian/Ubuntu).
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any, Iterator

import pytest

from diffattn.core.errors import ConfigError
from diffattn.pure.explorer import DEFAULT, GRID, N_MAX, PAGE, TRIALS, embed, reference_grid
from diffattn.pure.trials import try_setting
from tests.browser import CHROMEDRIVER, CHROMIUM, SKIP, console_errors, start

if not (CHROMIUM and CHROMEDRIVER):
    pytest.skip(SKIP, allow_module_level=True)
pytest.importorskip("selenium", reason="browser tests need selenium: pip install -e '.[dev]'")
from selenium.webdriver.common.by import By  # noqa: E402  (after the skips: selenium may be missing)
from selenium.webdriver.common.keys import Keys  # noqa: E402

TOLERANCE = 1e-9  # the page reproduces Python's numbers to 1e-9 (relative above 1, absolute below)
SHOWN = {"softmax-snr": ("softmax", "snr_median"), "softmax-share": ("softmax", "share", "mean"),
         "softmax-cos": ("softmax", "cos", "mean"), "diff-snr": ("diff", "snr_median"),
         "diff-share": ("diff", "share", "mean"), "diff-cos": ("diff", "cos", "mean"), "ratio": ("snr_ratio_median",)}


def leaves(obj: dict[str, Any], prefix: str = "") -> dict[str, float]:
    out: dict[str, float] = {}
    for key, value in obj.items():
        if isinstance(value, dict):
            out.update(leaves(value, f"{prefix}{key}."))
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            out[prefix + key] = float(value)
    return out


def close(got: float, expected: float) -> bool:
    return abs(got - expected) <= TOLERANCE * max(1.0, abs(expected))


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    driver = start()
    yield driver
    driver.quit()


@pytest.fixture(scope="module")
def grid_page(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict[str, Any]]]:
    """The page as `make site` ships it: Python's reference grid embedded."""
    grid = reference_grid()
    page = tmp_path_factory.mktemp("site") / "explorer.html"
    page.write_text(embed(PAGE.read_text(encoding="utf-8"), grid), encoding="utf-8")
    return page, grid


def open_page(browser: Any, path: Path = PAGE) -> None:
    browser.get(path.as_uri())
    console_errors(browser)  # earlier pages' messages are not this page's


def shown(browser: Any) -> dict[str, str]:
    return {name: browser.find_element(By.ID, name).get_attribute("data-value") for name in SHOWN}


def assert_shows(browser: Any, result: dict[str, Any]) -> None:
    for name, value in shown(browser).items():
        expected = result
        for key in SHOWN[name]:
            expected = expected[key]
        assert close(float(value), expected), f"{name}: page {value}, Python {expected}"


def type_into(browser: Any, element_id: str, text: str) -> None:
    box = browser.find_element(By.ID, element_id)
    box.send_keys(Keys.CONTROL, "a")
    box.send_keys(Keys.DELETE)
    box.send_keys(text)  # each key fires `input`, as when a learner types


def selfcheck(browser: Any) -> str:
    """The page's largest difference from the embedded grid, once it has recomputed it (after its first paint)."""
    browser.set_script_timeout(120)
    return browser.execute_script(
        "return new Promise(done => { const poll = () => { const v = document.getElementById('selfcheck')"
        ".dataset.maxDiff; v ? done(v) : setTimeout(poll, 50); }; poll(); })")


def message(browser: Any) -> str:
    return browser.find_element(By.ID, "message").text


def assert_no_nan(browser: Any) -> None:
    body = browser.find_element(By.TAG_NAME, "body").text
    assert not re.search(r"\bNaN\b", body), body
    assert all(v != "NaN" for v in shown(browser).values()), shown(browser)


def test_page_loads_without_console_errors_and_reproduces_the_reference_grid(browser: Any, grid_page: Any,
                                                                              tmp_path: Path) -> None:
    page, grid = grid_page
    open_page(browser, page)
    assert float(selfcheck(browser)) <= TOLERANCE
    check = browser.find_element(By.ID, "selfcheck")
    assert int(check.get_attribute("data-settings")) == len(GRID) == 25
    # the test's own comparison, not only the page's: every number try_setting returns, at each setting
    settings = [r["setting"] for r in grid]
    got = browser.execute_script(
        "return arguments[0].map(s => try_setting(s.n, s.mu, s.noise_std, s.rho, s.lam, s.variant, s.trials))",
        settings)
    for page_result, python_result in zip(got, grid):
        page_numbers, python_numbers = leaves(page_result), leaves(python_result)
        assert page_numbers.keys() == python_numbers.keys()
        bad = {k: (page_numbers[k], v) for k, v in python_numbers.items() if not close(page_numbers[k], v)}
        assert not bad, (python_result["setting"], bad)
    assert not console_errors(browser)
    shot = tmp_path / "explorer.png"
    browser.save_screenshot(str(shot))
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000, shot
    print(f"explorer screenshot: {shot}")


def test_the_page_fails_a_wrong_reference_value(browser: Any, grid_page: Any, tmp_path: Path) -> None:
    """The self-check can fail: one Python number nudged by 1e-6 shows as a difference above the tolerance."""
    _, grid = grid_page
    wrong = [dict(r) for r in grid]
    wrong[3] = {**wrong[3], "snr_ratio_median": wrong[3]["snr_ratio_median"] * (1 + 1e-6)}
    page = tmp_path / "explorer.html"
    page.write_text(embed(PAGE.read_text(encoding="utf-8"), wrong), encoding="utf-8")
    open_page(browser, page)
    value = selfcheck(browser)
    assert float(value) > TOLERANCE


@pytest.mark.parametrize("slider", ["n", "mu", "noise_std", "rho", "lam", "variant"])
def test_moving_each_slider_shows_pythons_values(browser: Any, slider: str) -> None:
    open_page(browser)
    before = shown(browser)
    element = browser.find_element(By.ID, slider if slider == "variant" else f"{slider}-range")
    element.send_keys(Keys.ARROW_DOWN if slider == "variant" else Keys.ARROW_RIGHT)  # one step, as a learner's key
    setting = {**DEFAULT}
    for name in ("n", "mu", "noise_std", "rho", "lam"):
        setting[name] = float(browser.find_element(By.ID, name).get_attribute("value"))
    setting["n"] = int(setting["n"])
    setting["variant"] = browser.find_element(By.ID, "variant").get_attribute("value")
    changed = {name: setting[name] for name in setting if setting[name] != DEFAULT[name]}
    assert list(changed) == [slider], changed  # the one knob moved, the others at lesson 03's setting
    assert shown(browser) != before or slider == "variant"  # V2 at σ(λ_t) = 0.8 is V1's row at λ = 0.8
    assert_shows(browser, try_setting(trials=TRIALS, **setting))
    assert message(browser) == ""


CLAMPED = [  # (box, typed, the setting the page must then show, words its message must contain)
    ("n", "1", {"n": 2}, "N must be >= 2"),
    ("n", "-5", {"n": 2}, "N must be >= 2"),
    ("noise_std", "-1", {"noise_std": 0.0}, "must be >= 0"),
    ("rho", "1.5", {"rho": 1.0}, "must be in [-1, 1]"),
]
REFUSED = [  # (variant, box, typed, words of the refusal)
    ("v2", "lam", "1", "strictly between 0 and 1"),
    ("v2", "lam", "-0.2", "strictly between 0 and 1"),
    ("v1", "lam", "", "must be a finite number"),
    ("v1", "noise_std", "", "must be a finite number"),
    ("v1", "mu", "1000", "float64"),
]


@pytest.mark.parametrize("box, typed, setting, words", CLAMPED)
def test_out_of_range_input_is_clamped_with_a_message(browser: Any, box: str, typed: str, setting: dict[str, Any],
                                                      words: str) -> None:
    open_page(browser)
    type_into(browser, box, typed)
    assert words in message(browser)
    assert float(browser.find_element(By.ID, f"{box}-range").get_attribute("value")) == setting[box]  # the slider too
    assert_no_nan(browser)
    assert_shows(browser, try_setting(trials=TRIALS, **{**DEFAULT, **setting}))


def test_n_is_capped_with_a_message(browser: Any) -> None:
    open_page(browser)
    type_into(browser, "n", str(10 * N_MAX))
    assert "capped" in message(browser) and browser.find_element(By.ID, "n-range").get_attribute("value") == str(N_MAX)
    assert_no_nan(browser)
    assert all(float(v) > 0 for v in shown(browser).values())  # computed at N_MAX, not refused


@pytest.mark.parametrize("variant, box, typed, words", REFUSED)
def test_input_without_a_safe_value_is_refused_with_pythons_reason(browser: Any, variant: str, box: str, typed: str,
                                                                   words: str) -> None:
    open_page(browser)
    browser.find_element(By.ID, "variant").send_keys(Keys.ARROW_DOWN if variant == "v2" else Keys.ARROW_UP)
    type_into(browser, box, typed)
    text = message(browser)
    assert text.startswith("refused: ") and words in text, text
    assert browser.find_element(By.TAG_NAME, "body").get_attribute("data-state") == "refused"
    assert set(shown(browser).values()) == {""}  # no number shown at all, rather than a wrong one
    assert_no_nan(browser)
    with pytest.raises(ConfigError, match=words.replace("[", r"\[")):  # Python refuses the same setting
        try_setting(trials=1, **{**DEFAULT, "variant": variant, box: float(typed) if typed else math.nan})
