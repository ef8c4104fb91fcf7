#!/usr/bin/env bash
# Fails, naming the file and line, when a library's code #includes what it may not use: another
# library not in its row of scripts/include-rules.txt (the allowed graph, written once there), a
# group of outside headers not in that row, or another library's internal headers (src/<lib>/).
# Reads every #include of src/ and include/etcdw/.
#   scripts/check-includes.sh [RULES_FILE]
set -euo pipefail
cd "$(dirname "$0")/.."
rules="${1:-scripts/include-rules.txt}"

mapfile -t files < <(find src include/etcdw -type f \( -name '*.cc' -o -name '*.h' -o -name '*.in' \) |
  sort)

awk -v rules="$rules" '
BEGIN {
  while ((getline line < rules) > 0) {
    sub(/#.*/, "", line)
    n = split(line, f, /[ \t]+/)
    first = ""
    for (i = 1; i <= n; i++) {
      if (f[i] == "") continue
      if (first == "") { first = f[i]; known[first] = 1; continue }
      allowed[first, f[i]] = 1
    }
  }
  close(rules)
  if (length(known) == 0) { print "check-includes: no rules in " rules > "/dev/stderr"; exit 2 }
  # The first part of an outside header path, and the group it belongs to.
  split("boost openssl rocksdb nghttp2 absl spdlog fmt yaml-cpp nlohmann CLI", g, " ")
  for (i in g) group[g[i]] = g[i]
  group["google"] = "proto"; group["grpcpp"] = "grpc"; group["grpc"] = "grpc"
  bad = 0
}

# The library a file belongs to: src/<lib>/... or include/etcdw/<lib>/...
FNR == 1 {
  lib = ""
  if (match(FILENAME, /^src\/[^\/]+\//)) lib = substr(FILENAME, 5, RLENGTH - 5)
  else if (match(FILENAME, /^include\/etcdw\/[^\/]+\//)) lib = substr(FILENAME, 15, RLENGTH - 15)
  dir = FILENAME; sub(/\/[^\/]*$/, "", dir)
  if (lib != "" && !(lib in known)) {
    printf "%s: library \"%s\" has no row in %s\n", FILENAME, lib, rules
    bad = 1
  }
}

/^[ \t]*#[ \t]*include[ \t]*[<"]/ {
  if (lib == "" || !(lib in known)) next
  line = $0
  sub(/^[ \t]*#[ \t]*include[ \t]*/, "", line)
  quote = substr(line, 1, 1)
  path = substr(line, 2)
  sub(/[>"].*/, "", path)
  target = ""; what = ""
  if (quote == "\"" && path ~ /\.grpc\.pb\.h$/) { target = "grpc" }
  else if (quote == "\"" && path ~ /\.pb\.h$/) { target = "proto" }
  else if (quote == "\"" && path ~ /^etcdw\/[^\/]+\//) {
    target = path; sub(/^etcdw\//, "", target); sub(/\/.*/, "", target)
  } else if (quote == "\"") {
    # A header of the library itself (beside the file, or a path under src/).
    if (system("test -f \"" dir "/" path "\"") == 0) next
    if (system("test -f \"src/" path "\"") == 0) {
      target = path; sub(/\/.*/, "", target)
      if (target != lib) {
        printf "%s:%d: %s reaches into the internals of %s (\"%s\"); use its public headers in include/etcdw/%s/\n",
          FILENAME, FNR, lib, target, path, target
        bad = 1
      }
      next
    }
    printf "%s:%d: \"%s\" is not a header of %s, nor etcdw/<library>/...\n", FILENAME, FNR, path, lib
    bad = 1
    next
  } else {
    head = path; sub(/\/.*/, "", head)
    if (path == "absl/base/thread_annotations.h") next  # annotations only: allowed everywhere
    if (path == "zlib.h") target = "zlib"
    else if (head in group && path ~ /\//) target = group[head]
    else next  # the standard library or the system
  }
  if (target == lib || (lib, target) in allowed) next
  if (target in known) what = "library " target
  else what = "the " target " headers"
  printf "%s:%d: %s may not include %s (%s); allowed: see %s\n", FILENAME, FNR, lib, path, what, rules
  bad = 1
}

END { exit bad }
' "${files[@]}" || {
  echo "check-includes: forbidden includes (fix the include or, if the design changed, $rules)" >&2
  exit 1
}
echo "check-includes: ${#files[@]} files follow $rules"
