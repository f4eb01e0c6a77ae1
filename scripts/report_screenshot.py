"""Render an HTML report page to a PNG, as the browser tests see it (for docs/):

    dlperf report latest --format html -o page.html
    python scripts/report_screenshot.py page.html docs/report.png

Opens PAGE in headless Chromium (tests/browser/harness.py: Debian's /usr/bin/chromium or DLPERF_CHROMIUM,
driven by Playwright; needs the dev extra), waits for the page's script, and writes a full-page screenshot.
Exit 1, with each problem on its own line, where the page made a request, logged an error, never said it was
ready, or came out blank; the PNG is written either way.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root: tests.browser.harness

from tests.browser.harness import assert_not_blank, render_png


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Render a dlperf HTML report page to a PNG (full page).")
    parser.add_argument("page", type=Path, help="the HTML file (dlperf report RUN --format html -o PAGE)")
    parser.add_argument("png", type=Path, help="where the screenshot goes")
    parser.add_argument("--timeout-s", type=float, default=30.0, help="how long to wait for the page's script")
    args = parser.parse_args(argv)
    if not args.page.is_file():
        print(f"report_screenshot: no such file: {args.page}", file=sys.stderr)
        return 2
    try:
        visit = render_png(args.page, args.png, ready_timeout_s=args.timeout_s)
    except RuntimeError as exc:  # no Chromium, or no Playwright: one line
        print(f"report_screenshot: {exc}", file=sys.stderr)
        return 2
    problems = visit.problems()
    try:
        assert_not_blank(args.png)  # the browser tests' thresholds
    except AssertionError as exc:
        problems.append(str(exc))
    print(f"{args.png}: ready in {visit.load_s:.2f} s ({visit.ready_by}), "
          f"{visit.counts.get('svg', 0)} svg, {visit.counts.get('table', 0)} tables")
    for p in problems:
        print(f"report_screenshot: {p}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
