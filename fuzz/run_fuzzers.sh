#!/usr/bin/env bash
# Runs every libFuzzer target of a fuzz build for a set time, one after another, and prints per target
# the executions, their rate, the inputs it added and whether it crashed (docs/FUZZING.md).
#
#   fuzz/run_fuzzers.sh BUILD_DIR [NAME...]        (make fuzz runs it on build-fuzz)
#
# Environment: FUZZ_SECONDS per target (default 60); FUZZ_ARGS, extra libFuzzer flags (e.g. -max_len=4096
# -timeout=5; not -jobs, whose workers log their stats to files of their own). Each target reads its committed corpus, fuzz/corpus/<name>/ (seeds and
# regressions/), and writes the inputs it finds to BUILD_DIR/fuzz-corpus/<name>/, never into the source
# tree; a crash's input goes to BUILD_DIR/fuzz-artifacts/<name>/ and its log to
# BUILD_DIR/fuzz-logs/<name>.log. Exits 1 when any target crashed (or failed to start).
set -u
build=${1:?usage: $0 BUILD_DIR [NAME...]}
shift
seconds=${FUZZ_SECONDS:-60}
src=$(cd "$(dirname "$0")" && pwd)
if [ $# -gt 0 ]; then
  names=("$@")
else
  names=()
  for f in "$src"/fuzz_*.cc; do
    n=$(basename "$f" .cc)
    names+=("${n#fuzz_}")
  done
fi

# Under ASan, libFuzzer's own -rss_limit_mb and -malloc_limit_mb catch an input that makes a decoder
# allocate without bound; a leak ends the run as a crash does.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

failed=0
rows=()
for name in "${names[@]}"; do
  exe="$build/fuzz/fuzz_$name"
  corpus="$build/fuzz-corpus/$name"
  artifacts="$build/fuzz-artifacts/$name/"
  log="$build/fuzz-logs/$name.log"
  mkdir -p "$corpus" "$artifacts" "$(dirname "$log")"
  if [ ! -x "$exe" ]; then
    rows+=("$(printf '%-14s %8s %12s %10s %6s  %s' "$name" - - - - "not built: $exe")")
    failed=1
    continue
  fi
  echo "== fuzz_$name: ${seconds}s"
  # shellcheck disable=SC2086  # FUZZ_ARGS is a list of flags
  "$exe" -max_total_time="$seconds" -print_final_stats=1 -timeout=25 -rss_limit_mb=2048 -malloc_limit_mb=1024 \
    -artifact_prefix="$artifacts" ${FUZZ_ARGS:-} "$corpus" "$src/corpus/$name" >"$log" 2>&1
  rc=$?
  # A crash prints the final stats twice; the last copy is the one to read.
  stat() { grep -h "^stat::$1:" "$log" | tail -1 | awk '{print $2 + 0}'; }
  execs=$(stat number_of_executed_units)
  rate=$(stat average_exec_per_sec)
  added=$(stat new_units_added)
  # A slow unit (libFuzzer's -report_slow_units, 10 s) is written too, but is no crash: on a loaded machine
  # (or a stopped fuzzer) ordinary inputs get there.
  crash=$(grep -ho "Test unit written to [^ ]*" "$log" | grep -v "/slow-unit-" | head -1 | sed 's/Test unit written to //')
  if [ $rc -ne 0 ] || [ -n "$crash" ]; then
    failed=1
    what=$(grep -hm1 -E "^==[0-9]+==ERROR|^SUMMARY|ERROR: libFuzzer|runtime error|terminate called" "$log")
    rows+=("$(printf '%-14s %8s %12s %10s %6s  %s' "$name" "$seconds" "$execs" "$rate" "$added" \
                    "CRASH ${crash:-rc=$rc}: ${what:-see $log}")")
  else
    rows+=("$(printf '%-14s %8s %12s %10s %6s  %s' "$name" "$seconds" "$execs" "$rate" "$added" "ok")")
  fi
done

echo
printf '%-14s %8s %12s %10s %6s  %s\n' target seconds execs "execs/s" new result
for row in "${rows[@]}"; do echo "$row"; done
exit $failed
