#!/usr/bin/env bash
# Throughput of several provision binaries side by side (docs/benchmarks.md, "Throughput"): rounds of
# `provision bench throughput` (10,000 devices, concurrency 256, journal with fsync), the binaries taking
# turns, each run between two readings of a calibrator — the CPU seconds of a fixed workload (SHA-256
# of 400 MB) — and the load average, so that figures taken while the shared machine was slower can be
# told apart.
#
#   Tests/Fixtures/throughput_ab.sh ROUNDS BINARY[=DIR] ...    (DIR: where the binary runs; default .)
#
# Prints one line per run: binary, load, calibrator before/after (s), CPU per device (ms, user+sys of
# the whole process / devices), the bench's own figures.
set -euo pipefail
rounds=$1
shift
calibrate() { /usr/bin/time -f "%U" sh -c 'head -c 400000000 /dev/zero | sha256sum > /dev/null' 2>&1 | tail -1; }
for r in $(seq "$rounds"); do
  for spec in "$@"; do
    bin=${spec%%=*}
    dir=.
    [[ $spec == *=* ]] && dir=${spec#*=}
    load=$(cut -d' ' -f1 /proc/loadavg)
    c1=$(calibrate)
    out=$(cd "$dir" && /usr/bin/time -f "time %U %S" "$bin" bench throughput 2>&1)
    c2=$(calibrate)
    cpu=$(echo "$out" | awk '/^time /{printf "%.3f", ($2 + $3) * 1000 / 10000}')
    figures=$(echo "$out" | grep -E "^(devices_per_s|run_cpu_ms_per_device|att_round_trips_per_device|peak_rss_mib):" | tr '\n' ' ')
    echo "round $r $(basename "$bin") load $load calibrator ${c1}/${c2}s cpu_ms_per_device $cpu $figures"
  done
done
