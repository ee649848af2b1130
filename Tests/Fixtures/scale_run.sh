#!/usr/bin/env bash
# The scale measurement of docs/benchmarks.md ("Scale: 100,000 devices"): a simulated run of N devices
# (default 100000) with the report, JUnit and events written, its peak memory and CPU from
# /usr/bin/time -v.
#
#   Tests/Fixtures/scale_run.sh [N] [PROVISION_BINARY]    (from the repository root)
#
# The inventory is `provision dev-inventory`'s, written compactly (flow maps without spaces, the blob
# file in `defaults`): dev-inventory's own file for 100,000 devices is 13.2 MB, over the 10 MiB that
# validation reads, and this one is 10.2 MB. Everything goes to a temporary directory, removed at the end.
set -euo pipefail
n=${1:-100000}
bin=$(realpath "${2:-.build/release/provision}")
root=$(pwd)
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$bin" dev-inventory --devices "$n" --out "$dir/src" > /dev/null
mkdir -p "$dir/run"
cp -r "$dir/src/blobs" "$dir/src/models" "$dir/run/"
{
  echo "simulator: { model: models/sensor-v2.yaml }"
  echo "defaults: { vars: { blob: blobs/blob-1.bin } }"
  echo "devices:"
  sed -n -E 's/^  - \{ id: ([^,]+), name: ([^,]+), address: ("[^"]+"), vars: \{ config: ("[0-9a-f]+"), blob: [^ ]+ \} \}$/- {id: \1, name: \2, address: \3, vars: {config: \4}}/p' \
    "$dir/src/inventory.yaml"
} > "$dir/run/inventory.yaml"
cp "$root/workflows/sensor-v2.yaml" "$dir/run/workflow.yaml"
echo "inventory: $(wc -c < "$dir/run/inventory.yaml") bytes, $(grep -c '^- {' "$dir/run/inventory.yaml") devices; load: $(cut -d' ' -f1-3 /proc/loadavg)"
cd "$dir/run"
/usr/bin/time -v "$bin" run workflow.yaml --inventory inventory.yaml --adapter sim --sim-latency 0 --concurrency 256 \
  --report r.json --junit j.xml --events e.jsonl --quiet 2> time.log || true
grep -E "Maximum resident|User time|System time|Elapsed" time.log
ls -l r.json j.xml e.jsonl r.journal | awk '{print $5, $9}'
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
