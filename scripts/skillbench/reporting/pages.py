"""HTML pages of the Markdown reports, with their figures inline, for ``snakemake --report``.

Owns turning ``report.md`` / ``summary.md`` and the SVG figures made for them into one
self-contained HTML page (no external resources: Snakemake's report shows an HTML result in a
frame from a data URI, so images are embedded as data URIs too). Deterministic: the same
Markdown and figures give the same bytes.

The Markdown quotes strings others chose (manifests, task suites, configs), and Snakemake's
report frames the page without a sandbox, so the page is built to run nothing: the rendered
Markdown goes through the allow-list sanitizer (`markup.sanitize_html`), every string this module
interpolates is HTML-escaped, and the page's first `<meta>` is a Content-Security-Policy that
forbids scripts and remote loads (`markup.CONTENT_SECURITY_POLICY`).
"""

from __future__ import annotations

import base64
import html
import re
from pathlib import Path

from skillbench.reporting.markup import CONTENT_SECURITY_POLICY, sanitize_html

STYLE = """
body { font: 14px/1.5 -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; color: #1f2328; margin: 24px;
       max-width: 1200px; }
h1 { font-size: 1.6em; border-bottom: 1px solid #d1d9e0; padding-bottom: .3em; }
h2 { font-size: 1.3em; border-bottom: 1px solid #d1d9e0; padding-bottom: .2em; margin-top: 1.6em; }
h3 { font-size: 1.1em; margin-top: 1.4em; }
table { border-collapse: collapse; display: block; overflow-x: auto; font-size: 12.5px; margin: 12px 0; }
th, td { border: 1px solid #d1d9e0; padding: 4px 8px; white-space: nowrap; }
th { background: #f6f8fa; }
tr:nth-child(2n) td { background: #fbfcfd; }
code { background: #eff1f3; padding: .1em .3em; border-radius: 4px; font-size: 90%; }
pre { background: #f6f8fa; padding: 10px; overflow-x: auto; }
figure { margin: 16px 0 24px; }
figure img { max-width: 100%; height: auto; }
figcaption { color: #59636e; font-size: 13px; max-width: 900px; }
.note { background: #ddf4ff; border-left: 4px solid #0969da; padding: 8px 12px; }
"""

FIGURE_TEXT = {
    "cost-resolution": (
        "Cost against resolution",
        "One point per run: filled = resolved, hollow = not resolved, × = excluded (infrastructure). The bar is the "
        "median over valid runs; each label gives the resolved runs and the cost per resolved run (all valid runs' "
        "cost divided by the runs that resolved). An arm is only cheaper if it is also as good.",
    ),
    "forest": (
        "Paired improvement per task",
        "The candidate's improvement over its incumbent per task (right of 0 = the candidate spent less), with its "
        "interval over the paired runs, and the median over gated tasks with the gate's bootstrap interval. The "
        "dashed line is the promotion threshold, the dotted one the largest allowed per-task regression; hollow "
        "squares are tasks the gate did not gate on (neither arm resolved them).",
    ),
    "generations": (
        "The generation chain",
        "Each generation's candidate (its overlay digest), the gate's decision per candidate arm and its median "
        "improvement with the bootstrap interval, against the promotion threshold.",
    ),
    "spend": (
        "Where the money went",
        "Total measured cost and the turns of each session, by session role (candidate sessions apart; proposer "
        "sessions included). Costs a session did not report are counted as unmeasured, never as 0.",
    ),
    "timeline": (
        "Timeline of cells",
        "Every cell of the run on the worker slot it occupied (cells that overlapped in time sit on different "
        "slots; the session cap bounds how many run at once): light bars are whole cells, dark bars their agent "
        "sessions. Gaps are bookkeeping, setup, verify and oracle time.",
    ),
}


def figure_text(path: str | Path) -> tuple[str, str]:
    """(title, caption) for a figure file: ``forest-<candidate arm>.svg`` names its pair."""
    stem = Path(path).stem
    if stem.startswith("forest-"):
        title, caption = FIGURE_TEXT["forest"]
        return f"{title}: {stem.removeprefix('forest-')}", caption
    return FIGURE_TEXT.get(stem, (stem, ""))


def markdown_to_html(text: str) -> str:
    """Markdown as sanitized HTML: raw HTML in the Markdown never survives as markup."""
    import markdown
    from markdown.extensions.tables import TableExtension

    tables = TableExtension(use_align_attribute=True)  # alignment as an attribute: the sanitizer drops styles
    rendered = markdown.markdown(text, extensions=[tables, "fenced_code", "sane_lists"], output_format="html")
    return sanitize_html(rendered)


def _figure_html(title: str, caption: str, svg: bytes) -> str:
    uri = "data:image/svg+xml;base64," + base64.b64encode(svg).decode("ascii")
    return (
        f'<figure><img alt="{html.escape(title)}" src="{uri}">'
        f"<figcaption><strong>{html.escape(title)}.</strong> {html.escape(caption)}</figcaption></figure>"
    )


def render_page(markdown_text: str, figures: list[tuple[str, str, bytes]], *, title: str | None = None) -> str:
    """One self-contained page: a heading (``title``, else the Markdown's first heading), then the figures
    (title, caption, SVG bytes), then the rest of the Markdown."""
    body = markdown_to_html(markdown_text)
    heading = re.match(r"\s*<h1>(.*?)</h1>\n?", body, re.DOTALL)
    head_html, rest = (heading.group(0), body[heading.end() :]) if heading else ("", body)
    if title:
        head_html = f"<h1>{html.escape(title)}</h1>\n"
    page_title = title or (html.unescape(re.sub(r"<[^>]+>", "", heading.group(1))) if heading else "skillbench report")
    figure_html = "\n".join(_figure_html(*figure) for figure in figures)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{html.escape(CONTENT_SECURITY_POLICY)}">'
        f"<title>{html.escape(page_title)}</title><style>{STYLE}</style></head><body>\n"
        f"{head_html}{figure_html}\n{rest}\n</body></html>\n"
    )
