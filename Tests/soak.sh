#!/usr/bin/env bash
# The suite must be green every time, not most times (docs/reliability.md, "An always-green suite").
#
#   Tests/soak.sh [--clones N] [--loaded M] [--ref REF] [--out DIR] [--keep]
#
# 1. N times in a row: a fresh `git clone` of this repository at REF, then `make test` in it, exactly
#    what CI runs (installs what is missing, the whole suite, the process suites against the release
#    binary).
# 2. M times: `swift test --no-parallel` (as `make test` runs it, with PostgreSQL required and Bumble's
#    Python) in one more fresh clone, built first, while two busy processes (`yes > /dev/null`), one
#    pinned on each of the first two CPUs, keep the machine loaded.
#
# Every run's output goes to DIR (default: a new directory under /tmp); DIR/summary.tsv has one line per
# run: kind, run, exit status, seconds, load average at the start, the failing tests. The script exits 0
# only when every run passed. Defaults: --clones 10 --loaded 5 --ref HEAD.
set -u -o pipefail

clones=10
loaded=5
ref=HEAD
out=""
keep=0
while [ $# -gt 0 ]; do
  case "$1" in
    --clones) clones="$2"; shift 2 ;;
    --loaded) loaded="$2"; shift 2 ;;
    --ref) ref="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --keep) keep=1; shift ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    *) echo "soak.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done

repo=$(git -C "$(dirname "$0")" rev-parse --show-toplevel) || { echo "soak.sh: not in a git repository" >&2; exit 2; }
commit=$(git -C "$repo" rev-parse --verify "$ref^{commit}") || { echo "soak.sh: no commit $ref" >&2; exit 2; }
[ -n "$out" ] || out=$(mktemp -d /tmp/provision-soak.XXXXXX)
mkdir -p "$out"
summary="$out/summary.tsv"
printf 'kind\trun\tstatus\tseconds\tload_at_start\tfailing\n' > "$summary"
command -v swift >/dev/null 2>&1 || export PATH=/opt/swift/usr/bin:$PATH

busy=()
work=()
cleanup() {
  for pid in "${busy[@]}"; do kill "$pid" 2>/dev/null; done
  if [ "$keep" = 0 ]; then for d in "${work[@]}"; do rm -rf "$d"; done; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# A fresh clone of the commit under test in a new directory (no hard links, no shared objects: as a
# new machine gets it); sets `dir` to the clone.
fresh_clone() {
  local parent
  parent=$(mktemp -d /tmp/provision-soak-clone.XXXXXX)
  work+=("$parent")
  dir="$parent/provision"
  git clone -q --no-local "$repo" "$dir" && git -C "$dir" checkout -q --detach "$commit"
}

# The tests that failed in a log: Swift Testing's ✘ lines, XCTest's failures, and build errors.
failing_tests() {
  # Build errors are `FILE:LINE:COL: error: …`; a test's own output may say "error:" too, and is not one.
  grep -aoE '✘ Test [^ ]+|Test Case .*failed|^[^ ]+:[0-9]+:[0-9]+: error: .*' "$1" | sed -E 's/^✘ Test //' | sort -u | head -20 | paste -sd ';' -
}

load_now() { cut -d' ' -f1-3 /proc/loadavg; }

record() {  # kind run status seconds load log
  local failing=""
  [ "$3" = 0 ] || failing=$(failing_tests "$6")
  printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" "$5" "$failing" >> "$summary"
  printf '%-7s run %2s: %s in %ss (load %s)%s\n' "$1" "$2" "$([ "$3" = 0 ] && echo pass || echo "FAIL ($3)")" "$4" "$5" \
    "${failing:+ — $failing}"
}

echo "soak: commit $commit, $clones clean-clone make test run(s), $loaded loaded swift test run(s); logs in $out"
failures=0

for i in $(seq 1 "$clones"); do
  log="$out/clone-$i.log"
  load=$(load_now)
  start=$SECONDS
  if fresh_clone; then
    (cd "$dir" && make test) > "$log" 2>&1
    status=$?
  else
    echo "git clone failed" > "$log"
    status=1
  fi
  record clone "$i" "$status" $((SECONDS - start)) "$load" "$log"
  [ "$status" = 0 ] || failures=$((failures + 1))
  if [ "$keep" = 0 ] && [ -n "${dir:-}" ]; then rm -rf "$(dirname "$dir")"; fi
done

if [ "$loaded" -gt 0 ]; then
  log="$out/loaded-build.log"
  if ! fresh_clone; then
    echo "soak: git clone failed" >&2
    exit 1
  fi
  # Built (and the tools installed) before the load starts: the loaded runs measure the tests.
  if ! (cd "$dir" && make deps postgres test-deps venv && swift build --build-tests) > "$log" 2>&1; then
    echo "soak: the build for the loaded runs failed; see $log" >&2
    exit 1
  fi
  cpus=$(nproc)
  for cpu in 0 1; do
    [ "$cpu" -lt "$cpus" ] || cpu=0
    taskset -c "$cpu" yes > /dev/null &
    busy+=("$!")
  done
  for i in $(seq 1 "$loaded"); do
    log="$out/loaded-$i.log"
    load=$(load_now)
    start=$SECONDS
    (cd "$dir" && PROVISION_REQUIRE_POSTGRES=1 PROVISION_PYTHON="$dir/.venv/bin/python3" \
       swift test --skip-build --no-parallel) > "$log" 2>&1
    status=$?
    record loaded "$i" "$status" $((SECONDS - start)) "$load" "$log"
    [ "$status" = 0 ] || failures=$((failures + 1))
  done
fi

echo "soak: $failures failing run(s); summary in $summary"
[ "$failures" = 0 ]
