#!/usr/bin/env bash
# Runs clang-tidy (the checks of .clang-tidy) on the C++ sources of src/ that changed, and on the
# sources beside the headers of include/etcdw/ that changed; fails when it reports anything.
#   scripts/check-tidy.sh [BASE]   files changed since BASE (a commit), plus uncommitted changes;
#                                  default: the last commit's parent (HEAD~1)
#   scripts/check-tidy.sh --all    every source of src/ (slow: several seconds a file)
# Needs the generated protobuf headers of a Release build (scripts/build.sh release).
set -euo pipefail
cd "$(dirname "$0")/.."
gen=build/release/proto/gen
if [[ ! -d "$gen" ]]; then
  echo "check-tidy: $gen is missing; build first (scripts/build.sh release)" >&2
  exit 2
fi

if [[ "${1:-}" == "--all" ]]; then
  mapfile -t changed < <(git ls-files 'src/*.cc' 'src/*.h' 'include/*.h')
else
  base="${1:-HEAD~1}"
  if ! git rev-parse -q --verify "$base^{commit}" >/dev/null; then
    echo "check-tidy: no commit $base to compare with (a shallow clone?); checking uncommitted" \
      "changes only" >&2
    base=HEAD
  fi
  mapfile -t changed < <({
    git diff --name-only "$base" -- src include
    git ls-files --others --exclude-standard -- src include
  } | sort -u)
fi

# The translation units to check: changed sources, and for a changed header the source of the
# same name in its library (include/etcdw/<lib>/<name>.h -> src/<lib>/<name>.cc), or the header
# itself when there is none.
units=()
for f in "${changed[@]}"; do
  [[ -f "$f" ]] || continue
  case "$f" in
    src/*.cc) units+=("$f") ;;
    include/etcdw/*.h)
      rel="${f#include/etcdw/}"
      cc="src/${rel%.h}.cc"
      if [[ -f "$cc" ]]; then units+=("$cc"); else units+=("$f"); fi
      ;;
    src/*.h)
      cc="${f%.h}.cc"
      if [[ -f "$cc" ]]; then units+=("$cc"); else units+=("$f"); fi
      ;;
  esac
done
mapfile -t units < <(printf '%s\n' "${units[@]}" | grep -v '^$' | sort -u)
if ((${#units[@]} == 0)); then
  echo "check-tidy: no changed C++ source in src/ or include/"
  exit 0
fi

flags=(-x c++ -std=c++20 -DFMT_SHARED -DSPDLOG_COMPILED_LIB -DSPDLOG_FMT_EXTERNAL -DSPDLOG_SHARED_LIB
  -Iinclude -isystem "$gen" -Wno-unknown-warning-option)
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
echo "check-tidy: ${#units[@]} files"
status=0
printf '%s\n' "${units[@]}" |
  xargs -P "$(nproc)" -I{} sh -c \
    'f="$1"; shift; out=$(clang-tidy --quiet "$f" -- "$@" 2>&1) || { printf "%s\n" "$out"; exit 1; }' \
    _ {} "${flags[@]}" >"$log" 2>&1 || status=1
if ((status != 0)); then
  grep -E 'warning:|error:' "$log" | sort -u >&2 || cat "$log" >&2
  echo "check-tidy: clang-tidy found problems (above)" >&2
  exit 1
fi
echo "check-tidy: clean"
