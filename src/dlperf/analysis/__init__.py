"""Cross-run analysis: what two runs or a run's history say, as data (no rendering).

`compare` (case by case B/A with intervals, `effect` for the statistics, `drift` for the machine's own drift by the
canary), `history` (a study's timeline per machine and its gate, `changepoints` to find where it moved) and
`machines` (which machine a result came from, and what of its environment is hardware or software), and `picking`
(the cases a figure rests on, picked one way for the claims and the study reports). `report/` renders what these
return; `claims/` and the study reports read them too.
"""
