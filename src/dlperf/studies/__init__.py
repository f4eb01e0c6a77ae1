"""Study files: the shipped ones, loading, validation and expansion into cases."""

from dlperf.studies.loader import Case, Study, load_study, resolve_path, shipped_studies

__all__ = ["Case", "Study", "load_study", "resolve_path", "shipped_studies"]
