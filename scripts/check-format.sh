#!/usr/bin/env bash
# Fails (listing the files) when a C++ source is not formatted as .clang-format says
# (Google style, 100 columns). Fix with: clang-format -i <files>
set -euo pipefail
cd "$(dirname "$0")/.."
if git rev-parse --git-dir >/dev/null 2>&1; then
  mapfile -t files < <(git ls-files 'src/*.cc' 'src/*.h' 'include/*.h' 'tests/*.cc' 'tests/*.h' \
    'bench/*.cc' 'bench/*.h' 'fuzz/*.cc')
else
  mapfile -t files < <(find src include tests bench fuzz -name '*.cc' -o -name '*.h' | sort)
fi
bad=()
for f in "${files[@]}"; do
  if ! clang-format --dry-run --Werror "$f" >/dev/null 2>&1; then bad+=("$f"); fi
done
if ((${#bad[@]})); then
  echo "not formatted (clang-format -i): ${bad[*]}" >&2
  exit 1
fi
echo "${#files[@]} files formatted"
