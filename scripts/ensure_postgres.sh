#!/bin/sh
# PostgreSQL's server programs for the test suite (tests/postgres_server.py starts a throwaway server from
# them on a Unix socket). Where initdb is missing: Debian's `postgresql` package is installed when this is
# Debian/Ubuntu and we are root (or may sudo without a password); otherwise one line says what is missing, and the postgres tests fail under
# DLPERF_REQUIRE_POSTGRES=1 (as `make test` runs them) instead of skipping.
set -e
have_initdb() { command -v initdb >/dev/null 2>&1 || ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; }
if have_initdb; then
    exit 0
fi
. "$(dirname "$0")/debian_install.sh"
if debian_install "ensure_postgres: installing Debian's postgresql (server binaries for the tests)" postgresql; then
    if ! have_initdb; then
        echo "ensure_postgres: postgresql was installed but initdb is still missing" >&2
        exit 1
    fi
    exit 0
fi
echo "ensure_postgres: PostgreSQL's server binaries (initdb, pg_ctl) are missing and cannot be installed here (not root, no password-less sudo, or no apt-get); install Debian's 'postgresql' package or put initdb on PATH: the PostgreSQL tests will fail" >&2
exit 0
