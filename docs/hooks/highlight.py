"""The colours of the code highlighted at build time: Pygments' stylesheet for the classes
that pymdownx.highlight writes, served from the site itself as `css/pygments.css`."""

from mkdocs.structure.files import File
from pygments.formatters import HtmlFormatter

STYLE = "default"
STYLESHEET = "css/pygments.css"


def on_files(files, config):
    css = HtmlFormatter(style=STYLE).get_style_defs(".highlight")
    files.append(File.generated(config, STYLESHEET, content=css))
    return files
