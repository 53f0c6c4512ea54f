#!/usr/bin/env bash
# deb_test.sh — builds tapegrad's Debian package from build-install/ (cpack -G DEB) and checks it
# for real: dpkg-deb metadata and contents, `apt-get install ./tapegrad_*.deb`, the installed
# /usr/bin/tapegrad, examples/mlp built against the installed package with no CMAKE_PREFIX_PATH,
# pkg-config, and finally `apt-get remove tapegrad` (also when a check fails).
# Needs root or sudo. Refuses to run when a tapegrad package is already installed.
# Usage: scripts/deb_test.sh [extra cmake args, e.g. -DTAPEGRAD_CUDA=OFF]   (used when build-install/
# is configured here for the first time; an existing build-install/ keeps its configuration)
# Environment: TAPEGRAD_JOBS (build jobs, default nproc), TAPEGRAD_INSTALL_BUILD_DIR (default build-install).
set -euo pipefail
cd "$(dirname "$0")/.."
build="${TAPEGRAD_INSTALL_BUILD_DIR:-build-install}"
jobs="${TAPEGRAD_JOBS:-$(nproc)}"
SUDO=""
if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
tmp=$(mktemp -d)
installed=0
cleanup() {
  if ((installed)) && dpkg-query -W -f='${Status}' tapegrad 2>/dev/null | grep -q "install ok installed"; then
    echo "deb_test: removing the package"
    $SUDO apt-get remove -y -q tapegrad >"$tmp/remove.log" 2>&1 || { echo "deb_test: apt-get remove failed:" >&2; cat "$tmp/remove.log" >&2; }
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT

# stage NAME COMMAND... (scripts/stages.sh): one status line, the output in a log under $tmp/logs,
# shown when the command fails (which ends the script, and the EXIT trap removes the package).
STAGE_LOG_DIR=$tmp/logs
source scripts/stages.sh
fail() { echo "deb_test: FAIL  $*" >&2; exit 1; }

if dpkg-query -W -f='${Status}' tapegrad 2>/dev/null | grep -q "install ok installed"; then
  fail "a tapegrad package is installed already; remove it first (apt-get remove tapegrad)"
fi

if [[ ! -f "$build/CMakeCache.txt" ]]; then
  stage "configure tapegrad in $build" cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DTAPEGRAD_BENCH=OFF \
    -DBUILD_TESTING=OFF "$@"
fi
stage "build tapegrad" cmake --build "$build" -j"$jobs"
rm -rf "$build/deb"
stage "cpack -G DEB" cpack -G DEB --config "$build/CPackConfig.cmake" -B "$build/deb"
debs=("$build"/deb/tapegrad_*.deb)
[[ ${#debs[@]} -eq 1 && -f ${debs[0]} ]] || fail "expected one tapegrad_*.deb in $build/deb, found: ${debs[*]}"
deb=$(realpath "${debs[0]}")
arch=$(dpkg --print-architecture)
[[ $(basename "$deb") == "tapegrad_0.1.0_${arch}.deb" ]] || fail "unexpected file name $(basename "$deb")"
echo "deb_test: ok    built $(basename "$deb") ($(du -h "$deb" | cut -f1))"

# Metadata and contents.
info=$(dpkg-deb -I "$deb")
for field in "Package: tapegrad" "Version: 0.1.0" "Architecture: $arch" "Maintainer: " "Description: "; do
  grep -q "^ $field" <<<"$info" || fail "dpkg-deb -I: no '$field' line"$'\n'"$info"
done
for dep in libopenblas-openmp-dev libfmt-dev libpcre2-dev nlohmann-json3-dev libgomp1; do
  grep -q "^ Depends:.*$dep" <<<"$info" || fail "dpkg-deb -I: Depends lacks $dep"
done
echo "deb_test: ok    dpkg-deb -I (package, version, architecture, maintainer, description, depends)"
contents=$(dpkg-deb -c "$deb")
libdir=$(sed -n 's/^CMAKE_INSTALL_LIBDIR:PATH=//p' "$build/CMakeCache.txt")   # lib (or lib/<multiarch>)
for f in ./usr/bin/tapegrad ./usr/include/tapegrad/autograd/tensor.h ./usr/include/tapegrad/lm/trainer.h \
         ./usr/"$libdir"/libtapegrad.a ./usr/"$libdir"/cmake/tapegrad/tapegradConfig.cmake ./usr/"$libdir"/pkgconfig/tapegrad.pc; do
  grep -q " $f\$" <<<"$contents" || fail "dpkg-deb -c: $f is not in the package"
done
echo "deb_test: ok    dpkg-deb -c ($(wc -l <<<"$contents") entries; tool, headers, libraries, CMake package, tapegrad.pc)"

# Install it for real (apt resolves the Depends; the package lists are refreshed when needed).
installed=1
if ! DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q "$deb" >"$tmp/install.log" 2>&1; then
  stage "apt-get update" $SUDO apt-get update -q
  stage "apt-get install ./$(basename "$deb") (after update)" env DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q "$deb"
else
  echo "deb_test: ok    apt-get install ./$(basename "$deb")"
fi
stage "/usr/bin/tapegrad info" /usr/bin/tapegrad info
stage "pkg-config --cflags --libs tapegrad (system paths)" pkg-config --cflags --libs tapegrad

# A user's project, found with no CMAKE_PREFIX_PATH: /usr is searched by default.
stage "configure examples/mlp against the package" cmake -S examples/mlp -B "$tmp/mlp" -DCMAKE_BUILD_TYPE=Release
grep -q "^tapegrad_DIR:PATH=/usr/$libdir/cmake/tapegrad\$" "$tmp/mlp/CMakeCache.txt" ||
  fail "examples/mlp did not find the package in /usr/$libdir/cmake/tapegrad: $(grep '^tapegrad_DIR' "$tmp/mlp/CMakeCache.txt")"
stage "build examples/mlp" cmake --build "$tmp/mlp" -j"$jobs"
stage "run examples/mlp" "$tmp/mlp/mlp"
last=$(tail -n 1 "$STAGE_LOG_DIR/run_examples_mlp.log")
[[ $last =~ ^first\ loss\ ([0-9.eE+-]+)\ last\ loss\ ([0-9.eE+-]+)$ ]] || fail "mlp's last line: '$last'"
awk -v f="${BASH_REMATCH[1]}" -v l="${BASH_REMATCH[2]}" 'BEGIN { exit !(l < f) }' || fail "mlp's loss did not fall: $last"
echo "deb_test: ok    mlp: $last"

installed=0
stage "apt-get remove -y tapegrad" $SUDO apt-get remove -y -q tapegrad
[[ ! -e /usr/bin/tapegrad && ! -e /usr/$libdir/cmake/tapegrad ]] || fail "files left after apt-get remove"
echo "deb_test: passed"
