"""The self-contained HTML report: `render_html` draws a section list (the third renderer beside the terminal's
and Markdown's), `render_page` assembles one page for one or more runs (summary and verdicts, per run its
table, study sections, raw-sample box plots, validity flags, environment, reproduce commands, raw JSON)."""

from dlperf.report.html.page import render_page, render_sections_page
from dlperf.report.html.render import render_html

__all__ = ["render_html", "render_page", "render_sections_page"]
