#!/usr/bin/env bash
# Builds the libFuzzer targets with address sanitizer, seeds them from the protocol vectors and
# Tests/Fixtures/pdfjs, and runs each for FUZZ_SECONDS (default 60). A crash stops the run with the
# input saved under .build-fuzz/crashes/; once it is fixed, copy that input into
# Tests/FuzzRegressionTests/Inputs/<target>/ so `make test` replays it for good.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${FUZZ_SECONDS:-60}"
targets="${FUZZ_TARGETS:-request drawing yianazip delta}"
scratch=.build-fuzz
# The targets' document folder goes to memory when it can: a save's fsync there costs nothing.
if [ -d /dev/shm ] && [ -w /dev/shm ]; then export TMPDIR=/dev/shm; fi
python3 scripts/fuzz-seeds.py "$scratch/seeds"
mkdir -p "$scratch/crashes"
for target in $targets; do
  # SwiftPM hands swiftc `-sanitize=fuzzer -sanitize=address` as two flags, and the driver
  # keeps only the last for its compile jobs: the Swift code would get no coverage counters
  # (only the C++ would), so the combined flag is passed again, last.
  CANVAS_FUZZ=1 swift build --scratch-path "$scratch" --sanitize=fuzzer --sanitize=address \
    -Xswiftc -sanitize=fuzzer,address --product "fuzz-$target" 2>&1 \
    | grep -E "error|warning: unre|Build of" || true
  test -x "$scratch/debug/fuzz-$target" || { echo "fuzz-$target did not build" >&2; exit 1; }
  mkdir -p "$scratch/corpus/$target"
  echo "== fuzz-$target for ${seconds}s"
  # Leak detection is off: fontconfig and Cairo keep process-wide caches that it reports as
  # leaks. -timeout catches a hang (an input that takes over 10 s).
  ASAN_OPTIONS=detect_leaks=0 "$scratch/debug/fuzz-$target" -detect_leaks=0 -timeout=10 -rss_limit_mb=4096 -max_len=1048576 \
    -max_total_time="$seconds" -print_final_stats=1 -artifact_prefix="$scratch/crashes/$target-" \
    "$scratch/corpus/$target" "$scratch/seeds/$target" > "$scratch/$target.log" 2>&1 || true
  grep -E "^#[0-9]+[[:space:]]+(INITED|DONE)|stat::(number_of_executed_units|average_exec_per_sec|peak_rss_mb)|ERROR|SUMMARY|Fatal error|Test unit written|Loaded 1 modules" "$scratch/$target.log" || true
  if ! grep -qE "^#[0-9]+[[:space:]]+INITED cov:" "$scratch/$target.log"; then
    echo "fuzz-$target ran without coverage feedback: is it instrumented? (see $scratch/$target.log)" >&2
    exit 1
  fi
  if ls "$scratch/crashes/$target-"* >/dev/null 2>&1; then
    echo "fuzz-$target found a crash: $(ls "$scratch/crashes/$target-"*)" >&2
    exit 1
  fi
done
echo "every fuzz target ran ${seconds}s clean"
