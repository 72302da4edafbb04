#!/usr/bin/env bash
# Build kube-apiserver v1.20.2 from Debian bookworm's `kubernetes` source package
# with Debian's Go 1.19, for the Kubernetes connector tests (tests/kube/).
#
# The binary is cached outside the checkout, per machine, because the build takes
# several minutes; the script exits at once when the cached binary exists.
#   KUBE_CACHE_DIR   cache root (default /var/cache/issuance-console/kube)
#   KUBE_VERSION     upstream version tag (default v1.20.2)
#   KUBE_DEB_VERSION Debian source version (default 1.20.5+really1.20.2-1.1+deb12u1)
# Prints the path of the binary on its last line.
set -euo pipefail

KUBE_VERSION=${KUBE_VERSION:-v1.20.2}
KUBE_DEB_VERSION=${KUBE_DEB_VERSION:-1.20.5+really1.20.2-1.1+deb12u1}
CACHE_ROOT=${KUBE_CACHE_DIR:-/var/cache/issuance-console/kube}
# The "-reflect2" suffix keeps a binary built before the reflect2 swap below (which dies on
# the first custom resource) from being taken from an older cache.
CACHE=$CACHE_ROOT/$KUBE_VERSION-reflect2
BIN=$CACHE/kube-apiserver

# etcd-server is checked too: the tests run kube-apiserver against Debian's etcd.
if [ -x "$BIN" ] && [ -x /usr/bin/etcd ]; then
  echo "$BIN"
  exit 0
fi

log() { echo "build-kube-apiserver: $*" >&2; }
SUDO=
if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi

# Toolchain and etcd (the tests run kube-apiserver against Debian's etcd-server).
need=()
test -x /usr/lib/go-1.19/bin/go || need+=(golang-1.19-go)
test -x /usr/bin/etcd || need+=(etcd-server)
command -v rsync >/dev/null || need+=(rsync)
command -v dpkg-source >/dev/null || need+=(dpkg-dev)
command -v make >/dev/null || need+=(make)
# The tree vendors github.com/modern-go/reflect2 v1.0.1, whose map iteration is broken on
# Go >= 1.18: kube-apiserver dies with SIGSEGV (aeshashbody/mapiterinit) on the first custom
# resource it stores. Debian's package (1.0.2, from the machine's own apt sources) replaces it.
REFLECT2=/usr/share/gocode/src/github.com/modern-go/reflect2
test -f "$REFLECT2/reflect2.go" || need+=(golang-github-modern-go-reflect2-dev)
if [ ${#need[@]} -gt 0 ]; then
  log "installing ${need[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
fi

if [ -x "$BIN" ]; then
  echo "$BIN"
  exit 0
fi

mkdir -p "$CACHE"
WORK=$CACHE/build
APTDIR=$CACHE/apt
mkdir -p "$WORK" "$APTDIR/sources.list.d" "$APTDIR/lists/partial" "$APTDIR/cache/archives/partial"

# A private apt configuration holding only deb-src entries, so the machine's own sources
# (and its package lists) stay untouched. They are made from the machine's own apt sources:
# the same mirrors, suites and keys, with "deb" turned into "deb-src" (no host is named here).
rm -f "$APTDIR"/sources.list.d/*
for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
  [ -f "$f" ] || continue
  sed -n 's/^[[:space:]]*deb[[:space:]]/deb-src /p' "$f" >> "$APTDIR/sources.list.d/machine-src.list"
done
for f in /etc/apt/sources.list.d/*.sources; do
  [ -f "$f" ] || continue
  sed 's/^Types:.*/Types: deb-src/' "$f" > "$APTDIR/sources.list.d/$(basename "$f")"
done
if [ -z "$(ls -A "$APTDIR/sources.list.d")" ]; then
  echo "no apt sources found in /etc/apt to fetch the kubernetes source package from" >&2
  exit 1
fi
APT_OPTS=(
  -o "Dir::Etc::sourcelist=/dev/null"
  -o "Dir::Etc::sourceparts=$APTDIR/sources.list.d"
  -o "Dir::State::Lists=$APTDIR/lists"
  -o "Dir::Cache=$APTDIR/cache"
)

SRCDIR=$(find "$WORK" -maxdepth 1 -mindepth 1 -type d -name 'kubernetes-*' | head -n1 || true)
if [ -z "$SRCDIR" ] || [ ! -f "$SRCDIR/Makefile" ]; then
  log "fetching the kubernetes=$KUBE_DEB_VERSION source package"
  apt-get "${APT_OPTS[@]}" update -qq
  (cd "$WORK" && apt-get "${APT_OPTS[@]}" source --download-only "kubernetes=$KUBE_DEB_VERSION")
  DSC=$(ls "$WORK"/kubernetes_*.dsc | head -n1)
  log "unpacking $(basename "$DSC")"
  rm -rf "$WORK/src"
  # --skip-patches: Debian's three patches (table printing and CVE-2021-25743, terminal
  # escapes in kubectl output) touch only kubectl/cli-runtime, not kube-apiserver; the
  # upstream tree with its vendor/ directory builds as it is.
  (cd "$WORK" && dpkg-source --no-check --skip-patches -x "$DSC" src >&2)
  SRCDIR=$WORK/src
fi

log "replacing the vendored reflect2 with Debian's $(dpkg-query -W -f '${Version}' golang-github-modern-go-reflect2-dev)"
rm -rf "$SRCDIR/vendor/github.com/modern-go/reflect2"
mkdir -p "$SRCDIR/vendor/github.com/modern-go/reflect2"
# Only the Go sources: the package also carries tests, which `-mod=vendor` would not build.
find "$REFLECT2" -maxdepth 1 -type f -name '*.go' ! -name '*_test.go' \
  -exec cp {} "$SRCDIR/vendor/github.com/modern-go/reflect2/" \;
cp "$REFLECT2"/*.s "$SRCDIR/vendor/github.com/modern-go/reflect2/" 2>/dev/null || true

log "building kube-apiserver in $SRCDIR (several minutes)"
(
  cd "$SRCDIR"
  export PATH=/usr/lib/go-1.19/bin:$PATH GOPROXY=off CGO_ENABLED=0 GOFLAGS=-mod=vendor
  export KUBE_GIT_VERSION=$KUBE_VERSION KUBE_GIT_TREE_STATE=clean
  nice -n 10 make WHAT=cmd/kube-apiserver >&2
)
OUT=$(find "$SRCDIR/_output" -type f -name kube-apiserver -perm -u+x | head -n1)
if [ -z "$OUT" ]; then
  log "no kube-apiserver binary under $SRCDIR/_output"
  exit 1
fi
install -m 0755 "$OUT" "$BIN.tmp"
mv "$BIN.tmp" "$BIN"
"$BIN" --version >&2
# The source tree and Go build cache are large; only the binary is kept.
rm -rf "$WORK"
echo "$BIN"
