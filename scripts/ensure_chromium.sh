#!/bin/sh
# Chromium for the browser tests (tests/browser/ open the HTML report in it, headless, through Playwright;
# Playwright's own browser download is never used). Where neither DLPERF_CHROMIUM, /usr/bin/chromium nor
# `chromium` on PATH gives one: Debian's `chromium` package is installed when this is Debian/Ubuntu and we are
# root (or may sudo without a password); otherwise one line says what is missing, and the browser tests fail
# under DLPERF_REQUIRE_CHROMIUM=1 (as `make test` runs them) instead of skipping.
set -e
if [ -n "$DLPERF_CHROMIUM" ]; then
    if [ -x "$DLPERF_CHROMIUM" ] && [ -f "$DLPERF_CHROMIUM" ]; then
        exit 0
    fi
    echo "ensure_chromium: DLPERF_CHROMIUM=$DLPERF_CHROMIUM is not an executable file: the browser tests will fail" >&2
    exit 0
fi
have_chromium() { [ -x /usr/bin/chromium ] || command -v chromium >/dev/null 2>&1; }
if have_chromium; then
    exit 0
fi
. "$(dirname "$0")/debian_install.sh"
if debian_install "ensure_chromium: installing Debian's chromium (headless browser for the HTML report tests)" \
        --no-install-recommends chromium fonts-liberation; then
    if ! have_chromium; then
        echo "ensure_chromium: chromium was installed but /usr/bin/chromium is still missing" >&2
        exit 1
    fi
    exit 0
fi
echo "ensure_chromium: Chromium is missing (no /usr/bin/chromium, no chromium on PATH) and cannot be installed here (not root, no password-less sudo, or no apt-get); install Debian's 'chromium' package or set DLPERF_CHROMIUM=/path/to/chrome: the browser tests will fail" >&2
exit 0
