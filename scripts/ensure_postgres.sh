#!/bin/sh
# PostgreSQL's server programs for the test suite (tests/postgres_server.py starts a throwaway server from
# them on a Unix socket). Where initdb is missing: Debian's `postgresql` package is installed when this is
# Debian/Ubuntu and we are root; otherwise one line says what is missing, and the postgres tests fail under
# DLPERF_REQUIRE_POSTGRES=1 (as `make test` runs them) instead of skipping.
set -e
if command -v initdb >/dev/null 2>&1 || ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
    exit 0
fi
if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    echo "ensure_postgres: installing Debian's postgresql (server binaries for the tests)"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q postgresql >/dev/null \
        || { apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q postgresql >/dev/null; }
    exit 0
fi
echo "ensure_postgres: PostgreSQL's server binaries (initdb, pg_ctl) are missing; install Debian's 'postgresql' package (as root: apt-get install postgresql) or put initdb on PATH" >&2
exit 0
