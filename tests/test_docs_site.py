"""The docs site, built once in strict mode (a broken link, a result file that is not there, a
docstring that cannot be rendered fail the build), then read as a browser would: it asks no
other host for anything, every section of a page is in the page's sidebar, and the API pages
show each documented parameter with its description and no Sphinx role markup."""

import importlib.util
import re
import shutil
import subprocess
import sys
import textwrap
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
VOID = {
    "area",
    "base",
    "br",
    "col",
    "embed",
    "hr",
    "img",
    "input",
    "link",
    "meta",
    "source",
    "track",
    "wbr",
}
# what a browser fetches by itself: any src or href but a link's, and a stylesheet's url()
FETCHED = ("src", "href", "srcset", "poster", "data")
OTHER_HOST = re.compile(r"^\s*(?:[a-z][a-z0-9+.-]*:)?//", re.I)
CSS_URL = re.compile(r"""@import\s+(?:url\()?\s*['"]?([^'")\s;]+)|url\(\s*['"]?([^'")\s]+)""", re.I)
ROLE = re.compile(
    r":(?:py:)?(?:mod|func|class|meth|attr|obj|data|exc|const|ref|doc|term|"
    r"math|any):`?[\w~.]+"
)


@dataclass
class Page:
    """What the checks need of one built HTML page."""

    path: str
    fetched: list = field(default_factory=list)  # (tag, attribute, URL) of what loads
    styles: list = field(default_factory=list)  # inline CSS: <style> blocks, style=""
    sections: list = field(default_factory=list)  # (level, id) of headings in the content
    sidebar: set = field(default_factory=set)  # the "#id" anchors of the sidebar
    text: list = field(default_factory=list)  # the content's text
    descriptions: list = field(default_factory=list)  # (name, text) of each documented item


class _Reader(HTMLParser):
    def __init__(self, page):
        super().__init__(convert_charrefs=True)
        self.page = page
        self.stack = []  # (tag, what it opens: "main", "sidebar", "description" or None)
        self.description = None
        self.item_codes = []  # the code texts of the current list item: its name first
        self.in_code = False

    def _inside(self, what):
        return any(opened == what for _, opened in self.stack)

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        classes = (attrs.get("class") or "").split()
        if tag != "a":
            self.page.fetched += [(tag, a, attrs[a]) for a in FETCHED if attrs.get(a)]
        if attrs.get("style"):
            self.page.styles.append(attrs["style"])
        opens = None
        if tag == "div" and attrs.get("role") == "main":
            opens = "main"
        elif "wy-menu" in classes:
            opens = "sidebar"
        elif "doc-md-description" in classes and self._inside("main"):
            opens = "description"
            self.description = (self.item_codes[0] if self.item_codes else "", [])
        if tag == "a" and self._inside("sidebar") and (attrs.get("href") or "").startswith("#"):
            self.page.sidebar.add(attrs["href"][1:])
        if re.fullmatch(r"h[1-6]", tag) and self._inside("main") and attrs.get("id"):
            self.page.sections.append((int(tag[1]), attrs["id"]))
        if tag in ("li", "tr"):
            self.item_codes = []
        if tag == "code":
            self.in_code = True
            self.item_codes.append("")
        if tag not in VOID:
            self.stack.append((tag, opens))

    def handle_endtag(self, tag):
        if tag == "code":
            self.in_code = False
        if tag not in (opened_tag for opened_tag, _ in self.stack):
            return  # a stray end tag
        while self.stack:
            opened_tag, opened = self.stack.pop()
            if opened == "description":
                name, words = self.description
                self.page.descriptions.append((name, "".join(words).strip()))
            if opened_tag == tag:
                break

    def handle_data(self, data):
        if self.lasttag == "style":
            self.page.styles.append(data)
        if self.in_code:
            self.item_codes[-1] += data
        if self._inside("main"):
            self.page.text.append(data)
            if self._inside("description"):
                self.description[1].append(data)


def read_page(path, site):
    page = Page(str(path.relative_to(site)))
    reader = _Reader(page)
    reader.feed(path.read_text(encoding="utf-8"))
    reader.close()
    return page


def rendering_defects(page):
    """What an API page renders wrongly: documented names with an empty description (the
    words of a paragraph that a docstring parser took for parameters) and Sphinx roles shown
    as text."""
    empty = [
        f"{page.path}: '{name}' has an empty description"
        for name, text in page.descriptions
        if not text
    ]
    text = "".join(page.text)
    roles = [f"{page.path}: role markup '{m.group(0)}'" for m in ROLE.finditer(text)]
    return empty + roles


def build(config_dir, site_dir):
    pytest.importorskip("mkdocs")
    pytest.importorskip("mkdocstrings")
    mkdocs = shutil.which("mkdocs", path=str(Path(sys.executable).parent))
    assert mkdocs, "mkdocs is installed but its command is not beside this Python"
    run = subprocess.run(
        [mkdocs, "build", "--strict", "--site-dir", str(site_dir)],
        cwd=config_dir,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    return site_dir


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """The project's site, built once for all the checks of this module."""
    return build(ROOT, tmp_path_factory.mktemp("docs") / "site")


@pytest.fixture(scope="module")
def pages(site):
    return [read_page(p, site) for p in sorted(site.rglob("*.html"))]


def api_pages(pages):
    return [p for p in pages if p.path.startswith("api/")]


def test_the_site_builds_in_strict_mode(site, pages):
    assert (site / "index.html").is_file()
    assert len(api_pages(pages)) >= 6


def test_no_request_leaves_the_site(site, pages):
    outside = [
        f"{p.path}: <{tag} {attr}={url!r}>"
        for p in pages
        for tag, attr, url in p.fetched
        if OTHER_HOST.match(url)
    ]
    css = [
        (str(f.relative_to(site)), f.read_text(encoding="utf-8", errors="replace"))
        for f in sorted(site.rglob("*.css"))
    ]
    css += [(p.path, style) for p in pages for style in p.styles]
    for name, text in css:
        urls = [a or b for a, b in CSS_URL.findall(text)]
        outside += [f"{name}: url {url!r}" for url in urls if OTHER_HOST.match(url)]
    assert not outside, "the site asks other hosts for:\n" + "\n".join(outside)


def test_every_section_is_in_the_sidebar(pages):
    """A second h1 (a result file's title, included as it is) ends the sidebar's list of the
    page's sections; every h2 and h3 of a page must be in it."""
    missing = []
    for page in pages:
        if not page.sidebar:  # 404.html and search.html have no sections
            assert not [s for s in page.sections if s[0] in (2, 3)], page.path
            continue
        titles = [id_ for level, id_ in page.sections if level == 1]
        if len(titles) != 1:
            missing.append(f"{page.path}: one h1 expected, found {titles}")
        missing += [
            f"{page.path}: h{level} #{id_}"
            for level, id_ in page.sections
            if level in (2, 3) and id_ not in page.sidebar
        ]
    assert not missing, "sections missing from the sidebar:\n" + "\n".join(missing)


def test_api_pages_render_the_docstrings(pages):
    defects = [d for p in api_pages(pages) for d in rendering_defects(p)]
    assert not defects, "\n".join(defects)


#: modules whose docstrings are numpydoc throughout: their API sections may show no defect
NUMPYDOC_MODULES = (
    "qs.estimators",
    "qs.model_selection",
    "qs.ssvm",
    "qs.detection",
    "qs.top_boxes",
    "qs.nets",
    "qs.surrogates",
    "qs.data",
)


def object_sections(path, site):
    """``(id, Page)`` of each object an API page documents at its top level (its own h2),
    read as `read_page` reads a page."""
    html = path.read_text(encoding="utf-8")
    sections = []
    for part in re.split(r'(?=<h2 id="qs\.)', html)[1:]:
        id_ = re.match(r'<h2 id="([^"]+)"', part).group(1)
        page = Page(f"{path.relative_to(site)}#{id_}")
        reader = _Reader(page)
        reader.feed('<div role="main">' + part)  # the object's own end tag closes it
        reader.close()
        sections.append((id_, page))
    return sections


def test_numpydoc_modules_render_without_defects(site):
    found, defects = set(), []
    for path in sorted((site / "api").rglob("*.html")):
        for id_, page in object_sections(path, site):
            module = next(
                (m for m in NUMPYDOC_MODULES if id_ == m or id_.startswith(m + ".")), None
            )
            if module:
                found.add(module)
                defects += rendering_defects(page)
    assert found == set(NUMPYDOC_MODULES), f"not on an API page: {set(NUMPYDOC_MODULES) - found}"
    assert not defects, "\n".join(defects)


NUMPYDOC = '''
def rank(scores, labels, loss="ap"):
    """Rank the samples.

    Parameters
    ----------
    scores : array of shape (n,), float
        One score per sample.
    labels : array of shape (n,), int or bool
        1 or True for a positive.
    loss : {"ap", "ndcg"}, default="ap"
        The loss, see `qs.losses`.

    Returns
    -------
    ranks : ndarray of shape (n,)
        The rank of each sample.

    Notes
    -----
    Ties: tied samples keep their input order.

    Examples
    --------
    >>> rank([0.5], [1])
    """
'''

LOOSE = '''
def rank(scores, labels, loss="ap"):
    """Rank the samples.

    Parameters
    ----------
    scores : array of shape (n,), float.
    labels : array of shape (n,), int or bool: 1 or True for a positive; see
        :mod:`qs.losses`.

    Ties: tied samples keep their input order.
    """
'''


def test_the_api_options_render_numpydoc_and_the_check_sees_a_loose_docstring(tmp_path):
    """The project's theme, Markdown extensions and mkdocstrings options on a two-page site:
    a numpydoc docstring renders with every parameter, its whole type and description, and
    no defect; a loosely written one shows the defects that the API check looks for."""
    project = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    (tmp_path / "docs").mkdir()
    for name, source in [("numpydoc_style", NUMPYDOC), ("loose_style", LOOSE)]:
        (tmp_path / f"{name}.py").write_text(textwrap.dedent(source), encoding="utf-8")
        (tmp_path / "docs" / f"{name}.md").write_text(f"# {name}\n\n::: {name}.rank\n")
    (tmp_path / "docs" / "index.md").write_text("# Home\n")
    config = {key: project[key] for key in ("theme", "markdown_extensions", "plugins")}
    config["site_name"] = "numpydoc"
    # the project's griffe warnings refuse the loose docstring (see the next test): off here,
    # so that the page renders and the check can be seen to catch it
    _griffe_warnings(config, False)
    (tmp_path / "mkdocs.yml").write_text(yaml.safe_dump(config), encoding="utf-8")
    site = build(tmp_path, tmp_path / "site")

    good = read_page(site / "numpydoc_style" / "index.html", site)
    assert rendering_defects(good) == []
    described = dict(good.descriptions)
    assert described["scores"] == "One score per sample."
    assert described["ranks"] == "The rank of each sample."
    text = "".join(good.text)
    assert "array of shape (n,), int or bool" in text
    assert "Ties: tied samples keep their input order." in text

    loose = rendering_defects(read_page(site / "loose_style" / "index.html", site))
    assert any("'Ties' has an empty description" in d for d in loose), loose
    assert any("role markup ':mod:" in d for d in loose), loose


def _griffe_warnings(config, on):
    """Set the mkdocstrings options that warn of unknown and untyped parameters."""
    for plugin in config["plugins"]:
        if isinstance(plugin, dict) and "mkdocstrings" in plugin:
            options = plugin["mkdocstrings"]["handlers"]["python"]["options"]
            options["docstring_options"] = {"warn_unknown_params": on, "warn_missing_types": on}


def test_the_strict_build_refuses_a_loose_docstring(tmp_path):
    """With the project's options a parameter list that runs into prose fails the strict
    build, naming the word taken for a parameter."""
    project = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    (tmp_path / "docs").mkdir()
    (tmp_path / "loose_style.py").write_text(textwrap.dedent(LOOSE), encoding="utf-8")
    (tmp_path / "docs" / "index.md").write_text("# Home\n\n::: loose_style.rank\n")
    config = {key: project[key] for key in ("theme", "markdown_extensions", "plugins")}
    config["site_name"] = "loose"
    (tmp_path / "mkdocs.yml").write_text(yaml.safe_dump(config), encoding="utf-8")
    mkdocs = shutil.which("mkdocs", path=str(Path(sys.executable).parent))
    run = subprocess.run(
        [mkdocs, "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode != 0
    assert "Ties" in run.stderr


def _includes_hook():
    spec = importlib.util.spec_from_file_location("includes", ROOT / "docs/hooks/includes.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_included_headings_move_below_the_section_that_includes_them():
    nest = _includes_hook().nest
    table = "# Table 5\n\n| a |\n|---|\n\n## Times\n\n```bash\n# a comment\n```\n#not a heading"
    assert nest(table, 2).splitlines() == [
        "### Table 5",
        "",
        "| a |",
        "|---|",
        "",
        "#### Times",
        "",
        "```bash",
        "# a comment",
        "```",
        "#not a heading",
    ]
    assert nest("##### deep", 3) == "###### deep"
