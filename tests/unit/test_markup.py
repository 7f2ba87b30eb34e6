"""Strings others chose render as text in the reports: the Markdown escapes, the sanitizer and the page's CSP."""

from __future__ import annotations

import html
from html.parser import HTMLParser

import markdown
import pytest
from rowfactory import make_row
from skillbench.reporting import markup, pages, report

# What a manifest, a suite or a config can hold: raw HTML, Markdown links and images, code-span breakouts,
# entities, block openers, line breaks.
PAYLOADS = [
    "<img src=x onerror=alert(1)>",
    "</td></tr></table><script>alert(1)</script>",
    "`<b>x</b>`",
    "``<b onclick=x>``",
    "[click](javascript:alert(1))",
    "![pixel](https://example.invalid/p.png)",
    "<https://example.invalid>",
    "&lt;script&gt;alert(1)&lt;/script&gt;",
    "*em* _u_ __b__ a_b_c",
    "# heading",
    "- item",
    "1. first",
    "> quote",
    "===",
    "line\n<script>alert(1)</script>",
    "tab\tand\rreturn",
    "\\<img src=x onerror=1>",
    "a|b",
    "`",
    "<!-- comment -->",
]


class Elements(HTMLParser):
    """Every start tag and attribute name of a page."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.attributes: set[str] = set()
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self.attributes |= {name for name, _ in attrs}

    def handle_data(self, data):
        self.text.append(data)


def parsed(page: str) -> Elements:
    elements = Elements()
    elements.feed(page)
    return elements


def rendered(markdown_text: str) -> Elements:
    return parsed(pages.markdown_to_html(markdown_text))


SAFE_TAGS = {"p", "ul", "li", "code", "table", "thead", "tbody", "tr", "th", "td", "strong", "h1"}


@pytest.mark.parametrize("payload", PAYLOADS)
@pytest.mark.parametrize("escape", [markup.md_text, markup.md_code, markup.md_prose])
def test_an_escaped_string_renders_as_its_text_in_running_text_lists_and_tables(payload, escape):
    value = escape(payload)
    document = (
        f"Value: {value} end\n\n- {value}\n\n| a | b |\n| --- | --- |\n" + report._table_line([value, "z"]) + "\n"
    )
    raw = parsed(markdown.markdown(document, extensions=["tables"]))  # the escape alone, before any sanitizer
    assert set(raw.tags) <= SAFE_TAGS, (payload, raw.tags)
    assert raw.attributes == set(), (payload, raw.attributes)
    line = "".join(raw.text).split("\n")[0]
    shown = payload.replace("\n", " ").replace("\r", " ").replace("\t", " ")
    if escape is not markup.md_prose:  # prose keeps `code` spans as code: their backticks are not text
        assert line == f"Value: {shown} end", (payload, line)


def test_md_text_leaves_ordinary_names_readable():
    assert markup.md_text("candidate_workflow_direct") == "candidate_workflow_direct"
    assert markup.md_text("claude-sonnet-4-5 v1.2.3 (2 excluded)") == "claude-sonnet-4-5 v1.2.3 (2 excluded)"
    assert markup.md_text("<img src=x>") == "&lt;img src=x&gt;"
    assert markup.md_text("# not a heading") == "&#35; not a heading"


def test_md_code_picks_a_fence_the_value_cannot_close():
    assert markup.md_code("plain") == "`plain`"
    assert markup.md_code("a`b") == "`` a`b ``"
    assert markup.md_code("x``y") == "``` x``y ```"


def test_md_prose_keeps_the_harness_code_spans_and_escapes_the_rest():
    assert markup.md_prose("set `runs` to 3 <now>") == "set `runs` to 3 &lt;now&gt;"


def test_the_sanitizer_keeps_report_markup_and_drops_everything_else():
    kept = pages.markdown_to_html("| a | b |\n|:--|--:|\n| **x** | [log](../cells/t/oracle.log) |\n")
    assert '<th align="left">a</th>' in kept and "<strong>x</strong>" in kept
    assert '<a href="../cells/t/oracle.log" rel="noopener noreferrer">log</a>' in kept
    dropped = rendered(
        '<script>alert(1)</script><img src=x onerror=alert(1)><iframe src="https://e"></iframe>'
        '<a href="javascript:alert(1)" onclick="x()">l</a><svg onload=alert(1)></svg><style>*{}</style>'
        "<form action=//e><input></form>\n\n[x](javascript:alert(1)) ![i](https://e/i.png)\n"
    )
    assert set(dropped.tags) <= {"p", "a"} and dropped.attributes <= {"rel"}, (dropped.tags, dropped.attributes)
    assert "alert(1)" not in "".join(dropped.text).replace("javascript:alert(1)", "")


def test_every_page_carries_a_csp_that_allows_no_script_and_no_remote_load():
    page = pages.render_page("# Title <b>x</b>\n\ntext\n", [("fig <i>", "cap <b>", b"<svg/>")])
    head = page[: page.index("</head>")]
    assert head.index('http-equiv="Content-Security-Policy"') < head.index("<title>")
    policy = html.unescape(head.split('http-equiv="Content-Security-Policy" content="')[1].split('"')[0])
    assert policy == markup.CONTENT_SECURITY_POLICY
    directives = dict(part.strip().split(" ", 1) for part in policy.split(";"))
    assert directives["default-src"] == "'none'" and "script-src" not in directives
    assert directives["img-src"] == "data:" and directives["style-src"] == "'unsafe-inline'"
    elements = parsed(page)
    assert "b" not in elements.tags and "i" not in elements.tags
    assert "<title>Title x</title>" in page  # the heading's text, escaped once


def test_report_and_summary_render_hostile_strings_as_text():
    evil = PAYLOADS[0]
    rows = [
        make_row("t1", "workflow", 0, **{"class": evil}, plugins=[{"name": "kit", "version": evil, "digest": "a" * 64}])
    ]
    text = report.render_report(
        rows, title=evil, task_order=["t1"], arm_order=["workflow"], provenance={"model": evil, "runs": 1}
    )
    summary = report.render_summary(
        {
            "experiment": "x",
            "outcome": "not_promoted",
            "generations_requested": 1,
            "promoted_generation": None,
            "next_step": f"set `runs` to {evil}",
            "broken_incumbent_arms": [],
            "budget_exhausted_cells": 0,
            "generations": [
                {
                    "generation": 0,
                    "candidate_origin": "proposer",
                    "candidate_overlay_digest": "b" * 64,
                    "required_candidate_arms": ["candidate_workflow"],
                    "decisions": [
                        {"candidate_arm": "candidate_workflow", "decision": "keep_incumbent", "reasons": [evil]}
                    ],
                    "gate_summary": [f"candidate_workflow: keep_incumbent — {evil}"],
                }
            ],
        }
    )
    for markdown_text in (text, summary):
        elements = rendered(markdown_text)
        assert "img" not in elements.tags and "onerror" not in elements.attributes
        assert evil in "".join(elements.text)
