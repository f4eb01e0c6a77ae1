"""Bundles: one file with everything a run is, for a machine that cannot reach the store (a Jetson on a bench):
`export_bundle` there, `import_bundle` into any store here (SQLite or PostgreSQL), idempotently.

The file (`FORMAT_NAME`, `FORMAT_VERSION`) is gzip-compressed JSON, named `*.dlperf.json.gz` (`zcat F | jq .`
reads it; an uncompressed copy imports too)::

    {"format": "dlperf-bundle", "format_version": 1, "written_by": "dlperf 0.1.0",
     "written_at": "2026-11-23T14:28:22.123456+00:00",
     "checksum": "sha256:<hex of the canonical content>",
     "content": {"run": {...}, "environments": [...], "results": [...], "study": {...}}}

- `run`: the run row (`RUN_FIELDS`, the store's column order), its environment named by `env_fingerprint_hash`;
  the run's study name, variant, hash, path and resolved settings are these fields (what the store holds).
- `environments`: each environment the run or any of its results refers to (a fleet run's results span the
  machines that ran them): `fingerprint_hash`, `data` (the fingerprint as first stored), `created_at`.
- `results`: every result row (`RESULT_FIELDS`) as the store holds it, raw samples (`measurement`) and metrics
  untouched (not recomputed), oldest first, each with its environment's `env_fingerprint_hash`; no store ids.
- `study`: `path` (as the run stored it), `yaml` (the file's text where, at export, the file at that path
  still gave the run's study hash, else null) and `note` (where it was read, or why not: "the file at PATH
  has changed since the run"). A store has no place for the text (no column; a migration would add one): an
  import does not keep it and says so, the bundle does; an export from that store reads the file at the
  run's path there, under the same check.

JSON objects keep the store's own key order; datetimes are ISO 8601 in UTC with their offset; floats are
written as Python's shortest round-trip form, so raw samples come back bit-identical. The checksum is the
SHA-256 of `content` serialized canonically (`canonical`): a truncated or edited file is refused, while
re-indenting it changes nothing. A later format adds a step that reads the one before (asv's
`util.update_json`); a bundle newer than `FORMAT_VERSION` is refused with one line.

NaN and infinities: a SQLite store holds them (a meter's NaN mean power), and the file spells them as Python's
`json` does (`NaN`, `Infinity`). A raw sample is never one (no timer gives one) and is never altered: a bundle
holding one is neither written nor imported. PostgreSQL's JSON cannot hold them: imported there, a result's
non-finite metrics are stored as null, with `metrics["nonfinite"] = {"values": {"energy.mean_power_w": "NaN",
...}, "reason": ...}` saying which, what and why (the import line counts them); one elsewhere (a parameter, the
run's filters, settings or derived figures, an environment) is refused with one line naming it.

An import is one transaction: environments are matched by fingerprint hash (reused, never duplicated), the
run keeps its own id, results missing from the store are added (case key and repetition name a result; a
later re-run of a stored case, as `--retry-failed` makes, replaces it), and the run's status and finish time
follow the bundle when it brought a result, or when its run ended later than the stored one (resumed to its
end since, even with nothing left to run; a stored run that has not ended counts as older). A run that a
live process is executing in the store (its lease held, the owner not provably gone) is refused: its status
and the cases it is about to store are that process's own; import once it has ended. Nothing is written when
anything is refused.
"""

from dlperf.store.bundle.base import (
    FORMAT_NAME,
    FORMAT_VERSION,
    RESULT_FIELDS,
    RUN_FIELDS,
    SUFFIX,
    Bundle,
    BundleError,
    canonical,
    checksum,
)
from dlperf.store.bundle.file import StudyReader, bundle_content, dumps, export_bundle, loads, read_bundle
from dlperf.store.bundle.importer import ImportOutcome, import_bundle

__all__ = ["FORMAT_NAME", "FORMAT_VERSION", "RESULT_FIELDS", "RUN_FIELDS", "SUFFIX", "Bundle", "BundleError",
           "ImportOutcome", "StudyReader", "bundle_content", "canonical", "checksum", "dumps", "export_bundle",
           "import_bundle", "loads", "read_bundle"]
