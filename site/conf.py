"""Sphinx configuration of the course's static site (`make site`).

Sources are the repository itself (`sphinx-build -c site . build/site/html`): README.md is the landing page (its course
map links every lesson and notebook), lessons/*.md are the lessons, notebooks/*.ipynb are executed by myst-nb into
the site only (cached by jupyter-cache under build/site/, never written back to the committed notebooks), and the
figures the lessons embed come from outputs/. sphinx-book-theme ships its CSS, JS and fonts in its wheel, so the site
loads nothing from the network; site/linkcheck.py checks that, and every internal link and anchor, after the build.
"""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BUILD = ROOT / "build" / "site"

project = "Differential Attention, from stdlib Python to FlashAttention"
author = "the course's authors"
root_doc = "README"
# the pages README and the lessons link to: instructors' and contributors' notes, lesson 13's skill file
REFERENCE = ["docs/setup.md", "docs/commands.md", "docs/misconceptions.md", "docs/students.md", "docs/instructors.md",
             "docs/gpu.md", "docs/benchmarks.md", "docs/reference.md", "CONTRIBUTING.md", "AGENTS.md",
             "tests/grading/README.md", "tests/grading/domains.md", "outputs/skill-diff-attention-integrator.md"]
include_patterns = ["README.md", "lessons/*.md", "lessons/notes/*.md", "lessons/answers/*.md", "notebooks/*.ipynb",
                    *REFERENCE]
exclude_patterns = ["build", ".venv", "**/.ipynb_checkpoints"]

extensions = ["myst_nb"]
myst_heading_anchors = 3  # GitHub-style anchors (#the-math) for the lessons' links to their own sections
myst_enable_extensions = ["dollarmath"]

nb_execution_mode = "cache"  # each notebook runs once; a rebuild reuses its outputs until the notebook changes
nb_execution_cache_path = str(BUILD / "jupyter_cache")
nb_execution_timeout = 600
nb_execution_raise_on_error = True  # a notebook that fails is a failed build, not a page with a traceback
nb_execution_show_tb = True
nb_kernel_rgx_aliases = {".*": "python3"}

html_theme = "sphinx_book_theme"
html_title = "Differential Attention"
html_theme_options = {"home_page_in_toc": True, "show_toc_level": 2}
html_context = {"default_mode": "auto"}  # the light/dark switch's start (unset, the theme logs a console error)
# index.html (to README.html), and site/explorer.html with Python's reference values (written by `make site`)
html_extra_path = ["extra", str(BUILD / "extra")]

# README stays plain GitHub Markdown; the site adds its table of contents (hidden: the course map is the visible one).
TOCTREE = """

```{toctree}
:hidden:
:caption: Lessons
:glob:
lessons/*
```

```{toctree}
:hidden:
:caption: Reproducibility notes and answers
:glob:
lessons/notes/*
%s
```

```{toctree}
:hidden:
:caption: Notebooks (executed)
:glob:
notebooks/*
```

```{toctree}
:hidden:
:caption: Reference
%s
```
""" % ("lessons/answers/*" if (ROOT / "lessons" / "answers").is_dir() else "",  # a handout may leave them out
       "\n".join(path.removesuffix(".md") for path in REFERENCE))
LINK = re.compile(r"\[([^\]]+)\]\(([^)\s#]+)\)")
EXPLORER = ROOT / "site" / "explorer.html"


def rewrite_links(app, docname, source):
    """Markdown pages only (a notebook's source is JSON): the explorer link goes to the page with Python's values
    (html_extra_path), not to a download of the bare file; a link to a folder, which a site cannot show, becomes
    its path in text."""
    path = Path(app.env.doc2path(docname))
    if path.suffix != ".md":
        return

    def fix(match):
        text, target = match.groups()
        if "://" in target or target.startswith("mailto:"):
            return match.group(0)
        resolved = (path.parent / target).resolve()
        if resolved == EXPLORER:
            return f'<a href="{target}">{text}</a>'
        if resolved.is_dir():
            folder = f"`{resolved.relative_to(ROOT)}/`"
            return folder if text.strip("`").rstrip("/") == str(resolved.relative_to(ROOT)) else f"{text} ({folder})"
        return match.group(0)

    source[0] = LINK.sub(fix, source[0])
    if docname == root_doc:
        source[0] += TOCTREE


def setup(app):
    app.connect("source-read", rewrite_links)
