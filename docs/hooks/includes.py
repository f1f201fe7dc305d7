"""Include the committed result files in the pages, their headings nested under the page's.

A line `--8<-- "voc2011_actions/default/table1.md"` in a page is replaced by that file of
`results/`. A result file is a document of its own: it opens with a `# title`. Included as it
is, that title would be a second top-level heading of the page, and the page's table of
contents (the sidebar) would end there. So each included heading is moved down below the
page's section that holds the include: under a `## section`, the file's `#` becomes `###`
and its `##` becomes `####`. A file that is not there fails the build.
"""

import re
from pathlib import Path

from mkdocs.exceptions import PluginError

RESULTS = "results"
INCLUDE = re.compile(r'^--8<-- "([^"]+)"[ \t]*$')
FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
HEADING = re.compile(r"^(#{1,6})(?=[ \t]|$)")


def _outside_fences(lines):
    """The indices of `lines` that are not inside a fenced code block (nor fence lines)."""
    fence = None
    for i, line in enumerate(lines):
        opening = FENCE.match(line)
        if fence:
            closing = line.strip()
            if (
                closing[:1] == fence[0]
                and len(closing) >= len(fence)
                and not closing.strip(fence[0])
            ):
                fence = None
        elif opening:
            fence = opening.group(1)
        else:
            yield i


def _headings(lines):
    """{index: level} of the ATX headings of `lines` outside fenced code blocks."""
    found = ((i, HEADING.match(lines[i])) for i in _outside_fences(lines))
    return {i: len(heading.group(1)) for i, heading in found if heading}


def nest(text: str, level: int) -> str:
    """`text` with each heading moved `level` levels down (at most to level 6)."""
    lines = text.splitlines()
    for i, depth in _headings(lines).items():
        lines[i] = "#" * min(depth + level, 6) + lines[i][depth:]
    return "\n".join(lines)


def on_page_markdown(markdown, page, config, files):
    root = Path(config.config_file_path).parent / RESULTS
    lines = markdown.splitlines()
    headings = _headings(lines)
    level = 0
    for i in _outside_fences(lines):
        level = headings.get(i, level)
        include = INCLUDE.match(lines[i])
        if include:
            path = root / include.group(1)
            if not path.is_file():
                raise PluginError(
                    f"{page.file.src_uri}: the included result file {path} is missing"
                )
            lines[i] = nest(path.read_text(encoding="utf-8"), level)
    return "\n".join(lines) + "\n"
