"""This machine: identity (fingerprint) now; peaks and the catalog in later issues."""
