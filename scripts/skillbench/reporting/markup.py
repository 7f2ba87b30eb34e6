"""Escaping for the reports: every string a report interpolates, for the context it lands in.

Reports carry strings that others chose: task classes from a suite, plugin names and versions from a
manifest, the model name from a config, reasons that quote them. They must render as text, never as
markup, in `report.md`/`summary.md` (read raw or rendered by any Markdown viewer) and in the HTML
pages `snakemake --report` shows. So a report escapes each interpolated value for its context
(`md_text` for running text and table cells, `md_code` for a code span, `md_prose` for a
harness-written sentence that may quote such values in code spans), and the HTML page of a report
passes the rendered Markdown through an allow-list sanitizer (`sanitize_html`) under a
Content-Security-Policy that allows no script and no remote load (`CONTENT_SECURITY_POLICY`).
"""

from __future__ import annotations

import re
from typing import Any

# Characters that start inline Markdown (emphasis, code, links, images, autolinks and raw HTML,
# entities); `|` is escaped by the table writer, which needs it in its own syntax.
_INLINE_SPECIAL = re.compile(r"[\\`*\[\]<>&]|_(?![A-Za-z0-9])|(?<![A-Za-z0-9])_")
# A value at the start of a line could open a block (heading, list, quote, setext underline).
_BLOCK_START = re.compile(r"^(\s*)([#+\-=>]|\d+[.)])")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_ENTITIES = {"<": "&lt;", ">": "&gt;", "&": "&amp;"}
_CODE_SPAN = re.compile(r"(`+)(.+?)\1")

ALLOWED_TAGS = frozenset(
    {
        "a",
        "blockquote",
        "br",
        "code",
        "del",
        "em",
        "h1",
        "h2",
        "h3",
        "h4",
        "h5",
        "h6",
        "hr",
        "li",
        "ol",
        "p",
        "pre",
        "strong",
        "table",
        "tbody",
        "td",
        "th",
        "thead",
        "tr",
        "ul",
    }
)
ALLOWED_ATTRIBUTES = {"a": {"href", "title"}, "td": {"align"}, "th": {"align"}, "ol": {"start"}}
ALLOWED_URL_SCHEMES = frozenset({"http", "https", "mailto"})
# No script, no frame, no form, nothing loaded from anywhere: the pages are self-contained (inline style,
# figures as data: images).
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; img-src data:; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'"
)


def _one_line(value: Any) -> str:
    """The value as text on one line: control and line-separator characters become spaces."""
    return _CONTROL.sub(" ", str(value))


def md_text(value: Any) -> str:
    """`value` as Markdown that renders as exactly its text, inline (running text, a list item, a table cell)."""

    def escape(match: re.Match[str]) -> str:
        char = match.group(0)
        return _ENTITIES.get(char, "\\" + char)

    text = _INLINE_SPECIAL.sub(escape, _one_line(value))
    return _BLOCK_START.sub(lambda match: match.group(1) + "".join(f"&#{ord(c)};" for c in match.group(2)), text)


def md_code(value: Any) -> str:
    """`value` as a Markdown code span: a fence longer than any backtick run inside, so it cannot close early."""
    text = _one_line(value)
    if not text.strip():
        return md_text(text)
    fence = "`" * (max((len(run) for run in re.findall(r"`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") or len(fence) > 1 else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def md_fenced(text: str, info: str = "") -> str:
    """`text` as a fenced code block: a backtick fence longer than any backtick run inside, so no line closes it
    early; the renderer escapes everything inside."""
    fence = "`" * max(3, max((len(run) for run in re.findall(r"`+", text)), default=0) + 1)
    body = text if text.endswith("\n") or not text else text + "\n"
    return f"{fence}{info}\n{body}{fence}"


def md_prose(text: Any) -> str:
    """A harness-written sentence (a gate reason, an advice line) as Markdown: its `code` spans stay code
    spans, everything else is text. Whatever a quoted value holds, each piece is escaped for where it lands."""
    source = _one_line(text)
    pieces: list[str] = []
    position = 0
    for match in _CODE_SPAN.finditer(source):
        pieces += [md_text(source[position : match.start()]), md_code(match.group(2))]
        position = match.end()
    pieces.append(md_text(source[position:]))
    return "".join(pieces)


def sanitize_html(fragment: str) -> str:
    """Rendered Markdown reduced to the tags and attributes a report uses; anything else (scripts, event
    handlers, frames, styles, images, forms, other URL schemes) is dropped."""
    import nh3

    return nh3.clean(
        fragment,
        tags=set(ALLOWED_TAGS),
        attributes={tag: set(names) for tag, names in ALLOWED_ATTRIBUTES.items()},
        url_schemes=set(ALLOWED_URL_SCHEMES),
        strip_comments=True,
        link_rel="noopener noreferrer",
    )
