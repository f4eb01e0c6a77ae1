"""Energy and power meters (issue 4); the doctor probes what exists here."""
