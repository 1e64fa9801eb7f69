"""Offline check of a built site (`make site` runs it; tests/test_site.py proves it catches each kind of breakage).

Fails on:
  missing-file     a link or resource whose local file does not exist (href, src)
  missing-anchor   a link to #id of a page (another or the same one) that has no element with that id
  network-load     anything the browser would fetch from the network when the page is viewed: an http(s) or
                   protocol-relative (//host) src, a <link> (stylesheet, preload, icon, ...) or any element other than
                   <a> with such an href or srcset, a url(...) or @import in a stylesheet or a style attribute
Links a reader follows (<a href="https://arxiv.org/...">) are not loads and are not checked: the check is offline.

    python site/linkcheck.py build/site/html
"""

from __future__ import annotations

import re
import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

REMOTE = re.compile(r"^(?:[a-z][a-z0-9+.-]*:)?//", re.I)  # http://, https://, //host (not data:, mailto:, javascript:)
CSS_URL = re.compile(r"""url\(\s*['"]?([^'")\s]+)|@import\s+['"]([^'"]+)""", re.I)
LOADS = ("src", "srcset", "poster", "data")  # attributes whose URL the browser fetches on view, on any element


class Page(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.ids: set[str] = set()
        self.links: list[tuple[str, str]] = []  # (url, what): followed links and local resources
        self.loads: list[str] = []  # remote URLs fetched on view

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = {name: value for name, value in attrs if value is not None}
        for name in ("id", "name") if tag == "a" else ("id",):
            if name in values:
                self.ids.add(values[name])
        urls = [(a, values[a]) for a in LOADS if a in values]
        if "href" in values:
            urls.append(("href", values["href"]))
        for attr, url in urls:
            for part in (url.split(",") if attr == "srcset" else [url]):
                part = part.strip().split(" ")[0]
                if REMOTE.match(part):
                    if not (tag in ("a", "area") and attr == "href"):
                        self.loads.append(f"<{tag} {attr}={part}>")
                elif part:
                    self.links.append((part, f"<{tag} {attr}>"))
        self.loads += [f'<{tag} style="url({u})">' for u in css_urls(values.get("style", "")) if REMOTE.match(u)]

    def handle_data(self, data: str) -> None:
        if self.lasttag == "style":
            self.loads += [f"<style> url({u})" for u in css_urls(data) if REMOTE.match(u)]


def css_urls(text: str) -> list[str]:
    return [a or b for a, b in CSS_URL.findall(text)]


def check(root: Path) -> list[str]:
    """Every problem in the site under `root`, one line each (empty: the site is whole and offline)."""
    root = root.resolve()
    # _static/*.html are the theme's Jinja macros, copied along with its assets, not pages
    pages = {path: Page() for path in sorted(root.rglob("*.html")) if "_static" not in path.relative_to(root).parts}
    for path, page in pages.items():
        page.feed(path.read_text(encoding="utf-8", errors="replace"))
    problems = []
    for path in sorted(root.rglob("*.css")):
        problems += [f"{path.relative_to(root)}: network-load url({u})"
                     for u in css_urls(path.read_text(encoding="utf-8", errors="replace")) if REMOTE.match(u)]
    for path, page in pages.items():
        where = path.relative_to(root)
        problems += [f"{where}: network-load {load}" for load in page.loads]
        for url, what in page.links:
            parts = urlsplit(url)
            if parts.scheme in ("mailto", "data", "javascript", "tel"):
                continue
            target = path if not parts.path else (path.parent / unquote(parts.path)).resolve()
            if parts.path.endswith("/") or target.is_dir():
                target = target / "index.html"
            if not target.is_file() or not target.is_relative_to(root):
                problems.append(f"{where}: missing-file {what} {url}")
            elif parts.fragment and target.suffix == ".html":
                ids = pages[target].ids if target in pages else set()
                if unquote(parts.fragment) not in ids:
                    problems.append(f"{where}: missing-anchor {what} {url}")
    return problems


def main(argv: list[str]) -> int:
    if len(argv) != 1 or not Path(argv[0]).is_dir():
        print("usage: python site/linkcheck.py BUILT_SITE_DIR", file=sys.stderr)
        return 2
    problems = check(Path(argv[0]))
    for line in problems:
        print(line)
    pages = sum(1 for p in Path(argv[0]).rglob("*.html") if "_static" not in p.parts)
    print(f"linkcheck: {pages} pages, {len(problems)} problems" + ("" if problems else " (links, anchors, offline)"))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
