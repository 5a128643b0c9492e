#!/usr/bin/env bash
# Build pyggml with AddressSanitizer (ggml too) in its own venv and build
# folder, then run the test suite under it.  Python itself is not
# instrumented, so libasan is preloaded; leak detection is off because the
# interpreter's own allocations would drown the report.
#
#   bash tools/asan_run.sh [pytest args...]     (default: the whole suite)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
work=${ASAN_WORK:-/tmp/pyggml-asan}
mkdir -p "$work"
python3 -m venv "$work/venv"
"$work/venv/bin/pip" install -q --upgrade pip
"$work/venv/bin/pip" install -q meson-python meson ninja "Cython>=3" numpy scikit-build-core pytest hypothesis gguf scikit-learn
"$work/venv/bin/pip" install -q --no-build-isolation "$root" -Cbuild-dir="$work/build" \
    -Csetup-args=-Db_sanitize=address -Csetup-args=-Db_lundef=false
libasan=$(gcc -print-file-name=libasan.so)
cd "$root/tests"
# the subprocess-based tests inherit the environment, so they run sanitized too
export LD_PRELOAD="$libasan"
export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1:allocator_may_return_null=1
export PYGGML_LEAK_CYCLES=${PYGGML_LEAK_CYCLES:-100}
"$work/venv/bin/python" -m pytest -q -p no:cacheprovider "${@:-.}"
