#!/usr/bin/env bash
# Builds the libFuzzer harnesses of fuzz/ with clang (ASan+UBSan) in build/fuzz and runs them.
#   scripts/fuzz.sh brief [SECONDS]   each harness SECONDS (default 15) on its corpus: for CI
#   scripts/fuzz.sh long [RUNS]       each harness RUNS executions (default 10000000), one at a
#                                     time: offline (docs/testing.md, "Fuzzing")
#   scripts/fuzz.sh build             only builds
# FUZZ_MAX_SECONDS=N stops each long run after N seconds (the count says how far it got);
# FUZZ_BUILD_DIR=DIR builds elsewhere than build/fuzz; FUZZERS="a b" runs only those harnesses.
# Prints per harness the executions done and whether it found anything; a crash input is left in
# build/fuzz/crashes/<name>/. Exit status 0 only if every harness built and found nothing; an
# interrupted run (Ctrl-C) says so and stops with status 130, claiming nothing.
set -uo pipefail
cd "$(dirname "$0")/.."
mode="${1:-brief}"
case "$mode" in
  brief) seconds="${2:-15}" ;;
  long) runs="${2:-10000000}" ;;
  build) ;;
  *)
    echo "usage: $0 brief [SECONDS] | long [RUNS] | build" >&2
    exit 2
    ;;
esac

dir="${FUZZ_BUILD_DIR:-build/fuzz}"
all=(http1_request go_json lzw object_xml etcd_config delta h2_connection peer_frames raft_log compression flags saved_records sidecar_answers bbolt kube_json requests snapshot_file sidecar_http_api admin_requests)
read -r -a fuzzers <<<"${FUZZERS:-${all[*]}}"
targets=()
for f in "${fuzzers[@]}"; do targets+=(--target "${f}_fuzzer"); done

# Ctrl-C reaches the whole process group: the build or the harness running stops, and the
# script after it (libFuzzer exits with -interrupt_exit_code, 130 here, not a failure's code).
interrupted=0
trap 'interrupted=1' INT
stop_if_interrupted() {
  if ((interrupted)); then
    echo "fuzz: interrupted${1:+ $1}; stopping" >&2
    exit 130
  fi
}

CC=clang CXX=clang++ cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DETCDW_FUZZ=ON \
  >/dev/null || { stop_if_interrupted; exit 1; }
cmake --build "$dir" -j "$(nproc)" "${targets[@]}" || { stop_if_interrupted; exit 1; }
stop_if_interrupted
[[ "$mode" == build ]] && exit 0

status=0
for f in "${fuzzers[@]}"; do
  corpus="fuzz/corpus/$f"
  crashes="$dir/crashes/$f"
  work="$dir/corpus/$f"  # what a run discovers; the checked-in corpus stays as written
  mkdir -p "$crashes" "$work"
  args=(-artifact_prefix="$crashes/" -print_final_stats=1 -max_len=4096 -interrupt_exit_code=130)
  if [[ "$mode" == brief ]]; then
    args+=(-max_total_time="$seconds")
  else
    args+=(-runs="$runs")
    [[ -n "${FUZZ_MAX_SECONDS:-}" ]] && args+=(-max_total_time="$FUZZ_MAX_SECONDS")
  fi
  log="$dir/$f.log"
  start=$SECONDS
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
    "$dir/fuzz/${f}_fuzzer" "${args[@]}" "$work" "$corpus" >"$log" 2>&1
  rc=$?
  execs="$(sed -nE 's/^stat::number_of_executed_units: *([0-9]+).*/\1/p' "$log" | tail -n 1)"
  if ((rc == 130)); then interrupted=1; fi
  stop_if_interrupted "in $f after ${execs:-?} executions in $((SECONDS - start)) s, log $log"
  if ((rc == 0)); then
    echo "fuzz: $f: ${execs:-?} executions in $((SECONDS - start)) s, nothing found"
  else
    echo "fuzz: $f: FOUND a failure after ${execs:-?} executions (exit $rc); input in $crashes/," \
      "log $log:" >&2
    grep -E 'ERROR|SUMMARY|_fuzzer: |runtime error' "$log" | head -n 20 >&2
    status=1
  fi
done
exit "$status"
