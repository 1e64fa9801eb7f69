"""The static site. The offline link check catches each kind of breakage it names; the explorer's grid is
embedded once and safely; `make site` (slow) builds the whole course, executed notebooks included, with no broken
link, no network load and, in Chromium when present, no console error on any page."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from diffattn.core.errors import ConfigError
from diffattn.pure.explorer import GRID, PAGE, PLACEHOLDER, embed
from tests.browser import CHROMEDRIVER, CHROMIUM, console_errors, start

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("linkcheck", ROOT / "site" / "linkcheck.py")
linkcheck = importlib.util.module_from_spec(spec)
spec.loader.exec_module(linkcheck)

GOOD = {
    "index.html": '<html><head><link rel="stylesheet" href="_static/a.css"><script src="_static/a.js"></script>'
                  '</head><body><h1 id="top">x</h1><a href="#top">top</a> <a href="lessons/one.html#part-2">2</a>'
                  ' <a href="https://arxiv.org/abs/2410.05258">paper</a> <a href="mailto:x@y.z">mail</a>'
                  ' <img src="_images/f.png" srcset="_images/f.png 1x, _images/f.png 2x"> <a href="lessons/">l</a>'
                  '<div style="background: url(_images/f.png)"></div></body></html>',
    "lessons/one.html": '<section id="part-2"><a href="../index.html#top">back</a></section>',
    "lessons/index.html": "<p>lessons</p>",
    "_static/a.css": "body { background: url('../_images/f.png'); }",
    "_static/a.js": "",
    "_static/macros.html": '<script src="{{ x }}"></script>',  # a theme's template, not a page
    "_images/f.png": "",
}
BREAKAGES = {  # kind -> (file, text appended to it)
    "missing-file": ("index.html", '<a href="lessons/two.html">gone</a>'),
    "missing-anchor": ("index.html", '<a href="lessons/one.html#part-3">no such part</a>'),
    "missing-anchor ": ("lessons/one.html", '<a href="#nowhere">same page</a>'),
    "network-load": ("index.html", '<script src="https://cdn.jsdelivr.net/npm/mathjax@3/es5/tex-mml-chtml.js"></script>'),
    "network-load ": ("index.html", '<link rel="stylesheet" href="https://fonts.googleapis.com/css?family=Lato">'),
    "network-load  ": ("index.html", '<img src="http://example.org/f.png">'),
    "network-load   ": ("index.html", '<iframe src="//www.youtube.com/embed/x"></iframe>'),
    "network-load    ": ("_static/a.css", "@import url(https://fonts.googleapis.com/css2?family=Inter);"),
    "network-load     ": ("index.html", '<img srcset="_images/f.png 1x, https://example.org/f2.png 2x">'),
    "network-load      ": ("lessons/one.html", '<div style="background-image: url(https://example.org/b.png)"></div>'),
}


def write_site(root: Path, extra: tuple[str, str] | None = None) -> Path:
    for name, text in GOOD.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text + (extra[1] if extra and extra[0] == name else ""))
    return root


def test_linkcheck_passes_a_whole_offline_site(tmp_path: Path):
    assert linkcheck.check(write_site(tmp_path)) == []


@pytest.mark.parametrize("kind", BREAKAGES, ids=lambda k: f"{k.strip()}-{len(k) - len(k.strip())}")
def test_linkcheck_catches_each_kind_of_breakage(tmp_path: Path, kind: str):
    problems = linkcheck.check(write_site(tmp_path, BREAKAGES[kind]))
    assert len(problems) == 1 and f": {kind.strip()} " in problems[0], problems
    assert problems[0].startswith(BREAKAGES[kind][0]), problems


def test_linkcheck_command_exits_nonzero_on_a_broken_site(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    assert linkcheck.main([str(write_site(tmp_path, BREAKAGES["missing-file"]))]) == 1
    assert "1 problems" in capsys.readouterr().out
    assert linkcheck.main([str(tmp_path / "nowhere")]) == 2


def test_explorer_page_has_one_placeholder_and_embeds_json_safely():
    page = PAGE.read_text(encoding="utf-8")
    assert page.count(PLACEHOLDER) == 1
    assert not any(tag in page for tag in ('src="http', "src='http", 'href="http', "//cdn")), "the page must be self-contained"
    grid = [{"setting": {"variant": "</script><script>alert(1)"}, "x": 1.5}]
    out = embed(page, grid)
    data = out.split('<script id="reference-grid" type="application/json">')[1].split("</script>")[0]
    assert json.loads(data.replace("<\\/", "</")) == grid and "</script><script>alert" not in out
    with pytest.raises(ConfigError, match="exactly once"):
        embed(out, grid)  # already embedded: no placeholder left
    assert len(GRID) == 25 and len({json.dumps(s, sort_keys=True) for s in GRID}) == 25  # 25 distinct settings


@pytest.mark.slow
@pytest.mark.timeout(1500)  # above the suite's 300 s: a fresh build runs all 13 notebooks (5 min at load 8 on 2 cores)
def test_make_site_builds_the_course_offline_with_executed_notebooks():
    """`make site` from this checkout: -n -W Sphinx build, notebooks executed (cached), link check (slow: ~2 min fresh)."""
    subprocess.run(["make", "site", f"PYTHON={sys.executable}"], cwd=ROOT, check=True, timeout=1400)
    html = ROOT / "build" / "site" / "html"
    assert linkcheck.check(html) == []
    for lesson in sorted((ROOT / "lessons").glob("*.md")):
        assert (html / "lessons" / f"{lesson.stem}.html").is_file(), lesson.name
    for notebook in sorted((ROOT / "notebooks").glob("*.ipynb")):
        page = (html / "notebooks" / f"{notebook.stem}.html").read_text(encoding="utf-8")
        assert "cell_output" in page, f"{notebook.name}: the site shows no executed output"
        assert '"execution_count": null' in notebook.read_text(), f"{notebook.name}: outputs leaked into the repository"
    explorer = (html / "site" / "explorer.html").read_text(encoding="utf-8")
    assert PLACEHOLDER not in explorer and '"setting"' in explorer  # Python's reference values are embedded
    for number in ("01", "02", "03"):
        lesson = next((html / "lessons").glob(f"{number}-*.html")).read_text(encoding="utf-8")
        assert 'href="../site/explorer.html"' in lesson, f"lesson {number} should link the explorer"
    if not (CHROMIUM and CHROMEDRIVER):
        pytest.skip("built and checked; the pages' console check needs Chromium (make browser-deps)")
    driver = start()
    try:
        pages = sorted(p for p in html.rglob("*.html") if "_static" not in p.relative_to(html).parts)
        errors = {}
        for page in pages:
            driver.get(page.as_uri())
            errors.update({str(page.relative_to(html)): e for e in console_errors(driver)})
        assert not errors, errors
    finally:
        driver.quit()
