"""The raw data of the page as JSON inside `<script type="application/json" id="dlperf-data">`.

What `dlperf export --format json` writes per run (the run, its environment, every result with its raw
samples), the verdicts, and the page's format version. Inside a <script> element the HTML parser looks
only for `</script`, so `<`, `>` and `&` are written as JSON escapes (\\u003c ...): a stored string can
never close the element, and JSON.parse / json.loads give the text back unchanged. So is the colon of
any http(s):// (the page names no web address, not even in its data). Numbers JSON cannot hold (NaN,
infinities) are written as the strings "NaN", "Infinity", "-Infinity".
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from dlperf.analysis.machines import MachineShare
from dlperf.report.history_report import HistoryDoc
from dlperf.report.html.svg import WEB_ADDRESS
from dlperf.report.matrix import MatrixDoc
from dlperf.report.study import ReportData
from dlperf.report.verdict import Verdict

FORMAT = "dlperf-html-report"
VERSION = 1
SCRIPT_ID = "dlperf-data"


def _finite(value: Any) -> Any:
    """`value` with every non-finite float made a string (JSON has no NaN)."""
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def document(datas: list[ReportData], verdicts: list[Verdict], generated_at: datetime,
             machines: Mapping[str, Sequence[MachineShare]] | None = None) -> dict[str, Any]:
    """The data the page embeds: per run what `export --format json` gives, and the verdicts; a run whose
    results came from several machines (`machines`, by run id) also holds each machine: its id, label, the
    environment ids its results name and its environment (a result's `env_id` names its machine)."""
    runs = []
    for d in datas:
        run = {"run": d.run.to_dict(), "environment": d.env, "results": [r.as_row() for r in d.results]}
        shares = list((machines or {}).get(d.run.id) or [])
        if len(shares) > 1:
            run["machines"] = [{"machine_id": s.machine_id, "label": s.label, "name": s.name,
                                "env_ids": list(s.env_ids), "environment": s.env} for s in shares]
        runs.append(run)
    return {"format": FORMAT, "version": VERSION, "generated_at": generated_at.isoformat(), "runs": runs,
            "verdicts": [dataclasses.asdict(v) for v in verdicts]}


def script_json(doc: dict[str, Any] | HistoryDoc | MatrixDoc) -> str:
    """`doc` as JSON safe to put between <script type="application/json"> and </script>."""
    text = json.dumps(_finite(doc), default=str, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    text = text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    text = text.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")
    return WEB_ADDRESS.sub(r"\1\\u003a", text)


def extract(page: str) -> Any:
    """The embedded data of a page this module wrote, parsed (for tests and for scripts reading a page)."""
    start = page.index(f'<script type="application/json" id="{SCRIPT_ID}">')
    body_start = page.index(">", start) + 1
    return json.loads(page[body_start:page.index("</script>", body_start)])
