#!/usr/bin/env bash
# Throughput on a Bumble fleet: `provision run` over hci:tcp (our HCI host) against the baseline, the
# same sensor-v2 sequence written on Bumble's own Python host stack (Tests/Fixtures/baseline_provision.py),
# each through its own station controller of one fleet, at concurrency 1, 4 and 16.
#
#   make release venv && Tests/Fixtures/bench_hci_vs_bumble.sh [DEVICES]
#
# Prints one line per measurement and a Markdown table for docs/benchmarks.md.
set -euo pipefail
cd "$(dirname "$0")/../.."
DEVICES=${1:-16}
PY=${PROVISION_PYTHON:-.venv/bin/python3}
BIN=.build/release/provision
WORK=$(mktemp -d)
trap 'kill $FLEET 2>/dev/null || true; rm -rf "$WORK"' EXIT

# A 2048-byte blob, as the baseline streams.
head -c 2048 /dev/urandom > "$WORK/blob.bin"
{
  echo "devices:"
  for i in $(seq 1 "$DEVICES"); do
    printf '  - { id: SN-%04d, name: SNS-%04d, address: "F0:00:00:00:%02X:%02X", vars: { config: "0a0b0c%02x", blob: blob.bin } }\n' \
      "$i" "$i" $((i >> 8)) $((i & 255)) $((i & 255))
  done
} > "$WORK/line.yaml"

"$PY" Tests/Fixtures/bumble_fleet.py --port 0 --stations 2 --devices "$DEVICES" --state-dir "$WORK/state" > "$WORK/fleet.out" 2>"$WORK/fleet.err" &
FLEET=$!
for _ in $(seq 1 300); do grep -q ready "$WORK/fleet.out" 2>/dev/null && break; sleep 0.1; done
read -r P1 P2 < <("$PY" -c 'import json,sys; r=json.loads(open(sys.argv[1]).readline()); print(*r["ports"][:2])' "$WORK/fleet.out")
# The fleet's addresses (the inventory above assumes the fixture's default scheme; check it).
"$PY" -c 'import json,sys; r=json.loads(open(sys.argv[1]).readline()); print("fleet:", len(r["devices"]), "devices, first", r["devices"][0]["address"])' "$WORK/fleet.out"

declare -A OURS BASE RT
for C in 1 4 16; do
  "$BIN" run workflows/sensor-v2.yaml --inventory "$WORK/line.yaml" --adapter "hci:tcp:127.0.0.1:$P1" --concurrency "$C" \
    --quiet --report "$WORK/r$C.json" > /dev/null || true
  read -r ok dpm rt < <("$PY" -c 'import json,sys; s=json.load(open(sys.argv[1]))["summary"]; print(s["outcomes"]["succeeded"], s["devices_per_minute"], s.get("att_round_trips_per_device"))' "$WORK/r$C.json")
  OURS[$C]=$dpm; RT[$C]=$rt
  echo "provision  c=$C  succeeded=$ok/$DEVICES  devices/min=$dpm  att_round_trips/device=$rt"
  line=$("$PY" Tests/Fixtures/baseline_provision.py --transport "tcp-client:127.0.0.1:$P2" --devices "$DEVICES" --concurrency "$C" | tail -1)
  BASE[$C]=$("$PY" -c 'import json,sys; print(json.loads(sys.argv[1])["devices_per_minute"])' "$line")
  echo "baseline   c=$C  $line"
done
echo
echo "| concurrency | provision (devices/min) | Bumble Python baseline (devices/min) | ratio | ATT round trips per device (provision) |"
echo "|---|---|---|---|---|"
for C in 1 4 16; do
  ratio=$("$PY" -c "print(f'{${OURS[$C]}/max(${BASE[$C]},1e-9):.2f}')")
  echo "| $C | ${OURS[$C]} | ${BASE[$C]} | $ratio | ${RT[$C]} |"
done
