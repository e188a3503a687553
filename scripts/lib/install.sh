# Sourced by scripts/test and scripts/faults: installs what the tests need, idempotently.
# Expects to run from the repository root. Functions:
#   install_venv          .venv with tests/requirements.txt (stamp: hash of the file)
#   install_kafka_jars    Apache Kafka jars via Maven into tests/.deps/kafka-libs (stamp: hash of the pom)
#   install_fuse3         fuse3 (Debian) for tests/faultfs
#   install_bindfs        bindfs (Debian) for the NFS-semantics tests
#   install_etcd          etcd-server (Debian) for the cluster tests
#   install_fincore       fincore (util-linux-extra or util-linux) for the drop-behind tests
#   install_prometheus    prometheus and promtool (Debian) for the metrics tests
#   install_chromium      chromium (Debian) for the web console's browser tests
#   install_franz         the franz-go scenarios (tests/franz, Go module proxy) built into tests/.deps

# Each step names the seconds since the script started, so a CI log shows where its time went.
log() { printf '\n==> [%4ds] %s\n' "$SECONDS" "$*" >&2; }

hash_of() { sha256sum "$@" | sha256sum | cut -c1-16; }

# as root, or through passwordless sudo
as_root() {
  if [[ $(id -u) -eq 0 ]]; then
    sh -c "$1"
  else
    sudo -n sh -c "$1"
  fi
}

VENV=.venv

install_venv() {
  local req=tests/requirements.txt
  local req_stamp="$VENV/.sluice-requirements-$(hash_of "$req")"
  if [[ ! -x "$VENV/bin/python" ]]; then
    log "creating $VENV"
    python3 -m venv "$VENV"
  fi
  if [[ ! -f "$req_stamp" ]] || ! "$VENV/bin/python" -c 'import pytest, xdist, confluent_kafka, kafka, playwright.sync_api, importlib.util as u, sys; sys.exit(u.find_spec("mfusepy") is None)' 2>/dev/null; then
    log "installing Python test dependencies ($req)"
    "$VENV/bin/python" -m pip install -q --disable-pip-version-check -r "$req"
    rm -f "$VENV"/.sluice-requirements-*
    touch "$req_stamp"
  fi
}

install_kafka_jars() {
  local pom=tests/kafka/pom.xml libs=tests/.deps/kafka-libs
  local libs_stamp="$libs/.pom-$(hash_of "$pom")"
  if [[ ! -f "$libs_stamp" ]]; then
    log "fetching Apache Kafka jars into $libs (Maven)"
    command -v mvn >/dev/null || { echo "mvn not found (needed to fetch Kafka jars)" >&2; return 1; }
    command -v java >/dev/null || { echo "java not found (needed for Kafka tools)" >&2; return 1; }
    local tmp="$libs.tmp.$$"
    rm -rf "$tmp"
    mvn -q -B -f "$pom" dependency:copy-dependencies -DoutputDirectory="$PWD/$tmp"
    rm -rf "$libs"
    mv "$tmp" "$libs"
    touch "$libs_stamp"
  fi
}

# tests/faultfs (crash-simulating file system; mfusepy loads libfuse3 via ctypes). Before
# bindfs, so that bindfs's "fuse | fuse3" dependency is met by fuse3 (the two conflict).
install_fuse3() {
  if ! command -v fusermount3 >/dev/null || ! python3 -c 'import ctypes.util, sys; sys.exit(not ctypes.util.find_library("fuse3"))' 2>/dev/null; then
    log "installing fuse3 (fusermount3, libfuse3; the crash-simulating file system tests/faultfs)"
    as_root 'apt-get update -qq && apt-get install -y -qq fuse3' >/dev/null || echo "fuse3 could not be installed; the faultfs tests will fail" >&2
  fi
}

install_bindfs() {
  if ! command -v bindfs >/dev/null; then
    log "installing bindfs (FUSE; NFS silly-rename semantics for tests/integration/test_nfs_semantics.py)"
    as_root 'apt-get update -qq && apt-get install -y -qq bindfs' >/dev/null || echo "bindfs could not be installed; the NFS-semantics tests will be skipped" >&2
  fi
}

install_etcd() {
  if ! command -v etcd >/dev/null; then
    log "installing etcd-server (Debian; the cluster tests start their own etcd on 127.0.0.1)"
    as_root 'apt-get update -qq && apt-get install -y -qq etcd-server' >/dev/null || true
    command -v etcd >/dev/null || { echo "etcd could not be installed; the cluster tests need it" >&2; return 1; }
  fi
}

# Debian 12 ships fincore in util-linux-extra, older releases in util-linux.
install_fincore() {
  if ! command -v fincore >/dev/null; then
    log "installing fincore (util-linux-extra or util-linux; page-cache residency in the drop-behind tests)"
    as_root 'apt-get update -qq && { apt-get install -y -qq util-linux-extra || apt-get install -y -qq util-linux; }' >/dev/null || true
    command -v fincore >/dev/null || echo "fincore could not be installed; the drop-behind tests will fail" >&2
  fi
}

# The metrics test starts its own Prometheus on 127.0.0.1 (the package's service, if the
# package starts one, is not used).
install_prometheus() {
  if ! command -v prometheus >/dev/null || ! command -v promtool >/dev/null; then
    log "installing prometheus (Debian; tests/integration/test_metrics.py scrapes a live broker with it)"
    as_root 'apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq prometheus' >/dev/null || true
    command -v prometheus >/dev/null || echo "prometheus could not be installed; the metrics test will fail" >&2
  fi
}

# The web console's browser tests (tests/integration/test_web_console.py) drive Debian's
# Chromium with Playwright for Python; nothing downloads a browser.
install_chromium() {
  if ! command -v chromium >/dev/null; then
    log "installing chromium (Debian; the web console's browser tests)"
    as_root 'apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium' >/dev/null || true
    command -v chromium >/dev/null || echo "chromium could not be installed; the web console tests will fail" >&2
  fi
}

# The franz-go scenarios (tests/franz): built by the harness into tests/.deps/franz-<hash of the
# sources>, so this is a no-op when they are built. Needs the Go toolchain (go 1.26+, what franz-go 1.22 asks).
install_franz() {
  command -v go >/dev/null || [[ -x /usr/local/go/bin/go ]] || {
    echo "go not found (needed to build the franz-go scenarios in tests/franz)" >&2; return 1; }
  log "building the franz-go scenarios (tests/franz) if they changed"
  "$VENV/bin/python" -c 'import sys; sys.path.insert(0, "tests/integration"); import harness; print(harness.franz_bin())'
}
