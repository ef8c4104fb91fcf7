#!/usr/bin/env bash
# Sets everything up and runs the whole test suite:
#   1. installs the dependencies (Debian packages),
#   2. builds the Release configuration (assertions kept) and runs every suite with ctest:
#      unit, diff (against etcd 3.4.23) and e2e (etcdctl, command line, crash recovery),
#   3. checks the sources: the allowed includes of each library (scripts/check-includes.sh), the
#      formatting (scripts/check-format.sh) and clang-tidy on the files the last commit and the
#      working tree changed (scripts/check-tidy.sh; ETCDW_TIDY_BASE=<commit> widens it);
#   4. builds the unit tests under AddressSanitizer+UBSan and runs them,
#   5. builds the libFuzzer harnesses (clang) and runs each briefly (scripts/fuzz.sh brief).
# Ends with one line "N passed, N failed". Exit status 0 only if everything passed.
set -uo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh || exit 1

total_pass=0
total_fail=0
status=0

run_ctest() {  # <build dir> <ctest args...>
  local dir="$1"
  shift
  local log
  log="$(mktemp)"
  (cd "$dir" && ctest --output-on-failure "$@") 2>&1 | tee "$log"
  local line
  line="$(grep -E '[0-9]+% tests passed, [0-9]+ tests? failed out of [0-9]+' "$log" | tail -n 1)"
  if [[ -z "$line" ]]; then
    echo "test.sh: no ctest summary from $dir" >&2
    status=1
    total_fail=$((total_fail + 1))
  else
    local failed all
    failed="$(sed -E 's/.* ([0-9]+) tests? failed out of ([0-9]+).*/\1/' <<<"$line")"
    all="$(sed -E 's/.* ([0-9]+) tests? failed out of ([0-9]+).*/\2/' <<<"$line")"
    total_fail=$((total_fail + failed))
    total_pass=$((total_pass + all - failed))
    [[ "$failed" == 0 ]] || status=1
  fi
  rm -f "$log"
}

if scripts/build.sh release; then
  run_ctest build/release -j 2
else
  echo "test.sh: release build failed" >&2
  status=1
  total_fail=$((total_fail + 1))
fi

run_check() {  # <name> <command...>: one check, counted like a test
  local name="$1"
  shift
  echo "== $name: $*"
  if "$@"; then
    total_pass=$((total_pass + 1))
  else
    echo "test.sh: $name failed" >&2
    total_fail=$((total_fail + 1))
    status=1
  fi
}
run_check includes scripts/check-includes.sh
run_check format scripts/check-format.sh
run_check tidy scripts/check-tidy.sh ${ETCDW_TIDY_BASE:+"$ETCDW_TIDY_BASE"}

if scripts/build.sh asan; then
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
    run_ctest build/asan -L unit -j 2
else
  echo "test.sh: sanitizer build failed" >&2
  status=1
  total_fail=$((total_fail + 1))
fi

# The libFuzzer harnesses (fuzz/), built with clang in build/fuzz, each run briefly on its corpus.
run_check fuzz scripts/fuzz.sh brief 5

echo "${total_pass} passed, ${total_fail} failed"
exit "$status"
