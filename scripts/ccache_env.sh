# ccache_env.sh — sourced by build.sh, test.sh and fuzz.sh: when Debian's ccache is installed, every
# build directory configured from here on compiles through it (CMake ≥ 3.17 takes the launcher from
# these variables at configure time), so a rebuild — or a fresh clone on a machine that has built
# tapegrad before — recompiles only what changed. CCACHE_BASEDIR makes the clone's absolute paths
# relative in the cache keys, so two clones in different directories share their entries.
# TAPEGRAD_CCACHE=0 turns it off.
if [[ ${TAPEGRAD_CCACHE:-1} != 0 ]] && command -v ccache >/dev/null 2>&1; then
  export CMAKE_C_COMPILER_LAUNCHER=ccache CMAKE_CXX_COMPILER_LAUNCHER=ccache CMAKE_CUDA_COMPILER_LAUNCHER=ccache
  CCACHE_BASEDIR="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
  export CCACHE_BASEDIR CCACHE_NOHASHDIR=1
fi
