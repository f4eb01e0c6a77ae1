"""The results store: schema, migrations, reads and writes, export."""

from dlperf.store.db import Store, default_db_path

__all__ = ["Store", "default_db_path"]
