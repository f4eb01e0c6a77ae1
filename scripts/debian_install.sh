# Sourced by scripts/ensure_*.sh: install Debian packages the test suite needs, where this machine allows it.
# debian_install MESSAGE APT-ARGS...: as root, or with password-less sudo, print MESSAGE and `apt-get install`
# the packages (once more after `apt-get update` if the first try fails; exit 1 if that fails too). Returns 1,
# installing nothing, where there is no apt-get or no way to be root: the caller says what is missing.
debian_install() {
    _msg=$1
    shift
    _sudo=""
    if [ "$(id -u)" != 0 ] && command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
        _sudo="sudo -n"  # a user who may sudo without a password
    fi
    if ! command -v apt-get >/dev/null 2>&1 || { [ "$(id -u)" != 0 ] && [ -z "$_sudo" ]; }; then
        return 1
    fi
    echo "$_msg"
    $_sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$@" >/dev/null \
        || { $_sudo apt-get update -q >/dev/null && $_sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$@" >/dev/null; } \
        || exit 1
}
