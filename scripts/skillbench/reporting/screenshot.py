"""A PNG of the HTML report (``snakemake --report``) opened on one page, or of a standalone page (a cell's),
taken with headless Chromium.

Owns the one developer tool behind ``make report-screenshot``: it copies the report with a
small script that opens the chosen result (by default the run summary page) the way a click
in the report's menu would, and asks Chromium for a screenshot of the window. A standalone page
(``--standalone``) is shot as it is, top of the page.

    python -m skillbench.reporting.screenshot REPORT_HTML OUT_PNG [--page summary.html] [--size 1400,1000]
    python -m skillbench.reporting.screenshot PAGE_HTML OUT_PNG --standalone [--size 1200,1500]
    python -m skillbench.reporting.screenshot URL OUT_PNG --wait-for TEXT [--size 1400,1000]

A URL (a web app such as `inspect view`, which loads its data after the page) is shot once its text holds
``--wait-for``, through Chromium's DevTools protocol (aiohttp, which the `inspect` extra brings).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

OPEN_PAGE = """
<script>
window.addEventListener("load", function () {
  setTimeout(function () {
    var suffix = %s;
    var path = Object.keys(results).find(function (p) { return p.endsWith(suffix); });
    if (!path) { document.title = "page not found: " + suffix; return; }
    app.showCategory(%s);
    app.setView({content: "html", contentPath: results[path].data_uri, resultPath: path});
    // The page frame is one screen high: keep the window from scrolling under it.
    document.documentElement.style.overflow = "hidden";
    document.body.style.overflow = "hidden";
  }, 300);
});
</script>
"""


def browser() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    raise SystemExit("no Chromium on PATH: install the Debian package `chromium` (make report-screenshot does)")


def with_opener(report_html: str, page: str, category: str) -> str:
    """The report with a script that opens ``page`` (a result path suffix) in ``category`` once it loaded."""
    script = OPEN_PAGE % (json.dumps(page), json.dumps(category))
    head, marker, tail = report_html.rpartition("</body>")
    if not marker:
        raise ValueError("not an HTML report: no </body>")
    return head + script + marker + tail


def take(
    report: Path, out: Path, *, page: str = "summary.html", category: str = "Run", size: tuple[int, int] = (1400, 1000)
) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        wrapped = Path(scratch) / "report.html"
        wrapped.write_text(with_opener(report.read_text(encoding="utf-8"), page, category), encoding="utf-8")
        shoot(wrapped, out, scratch=Path(scratch), size=size)
    crop_to_viewport(out)


def shoot(page: Path, out: Path, *, scratch: Path, size: tuple[int, int]) -> None:
    """Chromium's screenshot of ``page`` in a window of ``size``."""
    out.parent.mkdir(parents=True, exist_ok=True)
    command = [
        browser(),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--hide-scrollbars",
        "--no-first-run",
        f"--user-data-dir={scratch}/profile",
        f"--window-size={size[0]},{size[1]}",
        "--virtual-time-budget=8000",
        f"--screenshot={out.resolve()}",
        page.resolve().as_uri(),
    ]
    result = subprocess.run(command, capture_output=True, text=True, timeout=180)
    if result.returncode != 0 or not out.is_file():
        raise SystemExit(f"chromium failed ({result.returncode}): {result.stderr[-2000:]}")


def shoot_url(url: str, out: Path, *, wait_for: str, size: tuple[int, int], timeout_s: float = 120) -> None:
    """Chromium's screenshot of the web page at ``url`` once its text contains ``wait_for``."""
    import asyncio
    import base64
    import re
    import time

    import aiohttp

    async def run(port: int) -> bytes:
        async with aiohttp.ClientSession() as http:
            async with http.put(f"http://127.0.0.1:{port}/json/new?about:blank") as answer:
                target = await answer.json()
            async with http.ws_connect(target["webSocketDebuggerUrl"], max_msg_size=0) as socket:
                counter = 0

                async def call(method: str, **params: object) -> dict[str, object]:
                    nonlocal counter
                    counter += 1
                    await socket.send_json({"id": counter, "method": method, "params": params})
                    while True:
                        message = await socket.receive_json()
                        if message.get("id") == counter:
                            return dict(message.get("result") or {})

                await call(
                    "Emulation.setDeviceMetricsOverride",
                    width=size[0],
                    height=size[1],
                    deviceScaleFactor=1,
                    mobile=False,
                )
                await call("Page.navigate", url=url)
                deadline = time.monotonic() + timeout_s
                probe = f"document.body && document.body.innerText.includes({json.dumps(wait_for)})"
                while not (await call("Runtime.evaluate", expression=probe))["result"].get("value"):  # type: ignore[attr-defined]
                    if time.monotonic() > deadline:
                        raise SystemExit(f"{url}: the page never showed {wait_for!r}")
                    await asyncio.sleep(0.5)
                await asyncio.sleep(1.0)
                shot = await call("Page.captureScreenshot", format="png")
                return base64.b64decode(str(shot["data"]))

    with tempfile.TemporaryDirectory() as scratch:
        command = [browser(), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run"]
        command += [f"--user-data-dir={scratch}/profile", "--remote-debugging-port=0", "about:blank"]
        chrome = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
        try:
            port = None
            for line in chrome.stderr or []:
                found = re.search(r"DevTools listening on ws://[^:]+:(\d+)/", line)
                if found:
                    port = int(found.group(1))
                    break
            if port is None:
                raise SystemExit("chromium did not open its DevTools port")
            png = asyncio.run(run(port))
        finally:
            chrome.terminate()
            chrome.wait(timeout=30)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(png)


def crop_to_viewport(png: Path) -> None:
    """Headless Chromium's picture is taller than the page's viewport: cut it where the report's menu (a dark
    column one viewport high, on the left edge) ends."""
    import matplotlib.image

    image = matplotlib.image.imread(png)
    dark = [row for row in range(image.shape[0]) if image[row, 10, :3].sum() < 2.0]
    if dark and dark[-1] + 1 < image.shape[0]:
        matplotlib.image.imsave(png, image[: dark[-1] + 1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m skillbench.reporting.screenshot",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("report", help="the report's HTML file, a page (--standalone) or a URL (--wait-for)")
    parser.add_argument("out", type=Path)
    parser.add_argument("--page", default="summary.html", help="open the result whose path ends with this")
    parser.add_argument("--category", default="Run")
    parser.add_argument("--size", default="1400,1000", help="window WIDTH,HEIGHT")
    parser.add_argument("--standalone", action="store_true", help="REPORT_HTML is a page of its own (a cell page)")
    parser.add_argument("--wait-for", dest="wait_for", help="REPORT_HTML is a URL: shoot once its text holds this")
    args = parser.parse_args(argv)
    width, height = (int(part) for part in args.size.split(","))
    if args.wait_for:
        shoot_url(str(args.report), args.out, wait_for=args.wait_for, size=(width, height))
    elif args.standalone:
        with tempfile.TemporaryDirectory() as scratch:
            shoot(Path(args.report), args.out, scratch=Path(scratch), size=(width, height))
    else:
        take(Path(args.report), args.out, page=args.page, category=args.category, size=(width, height))
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
