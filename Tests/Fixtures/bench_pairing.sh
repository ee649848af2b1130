#!/bin/bash
# Pairing's cost per device against the Bumble fleet on a paced link (15 ms per LL PDU each way): eight
# devices one at a time, a workflow of scan, connect (with SECURITY), one read, disconnect, run twice with
# the same --bonds file; prints each run's CPU and wall time and the connect step's durations.
# docs/benchmarks.md ("Pairing's cost per device") records the results.
# Usage (from the package root, after `swift build -c release`): Tests/Fixtures/bench_pairing.sh none|encrypted|authenticated
set -e
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
SEC=$1; D="${TMPDIR:-/tmp}/bench-pairing-$SEC"; rm -rf $D; mkdir -p $D/state
PROV="$ROOT/.build/release/provision"
PY="${PROVISION_PYTHON:-$ROOT/.venv/bin/python3}"
mkfifo $D/in
$PY "$ROOT/Tests/Fixtures/bumble_fleet.py" --port 0 --devices 8 --security $SEC --link-latency 15ms --adv-interval 50ms \
   --state-dir $D/state --exit-on-stdin-eof < $D/in > $D/ready 2>$D/fleet.err &
FLEET=$!
exec 3>$D/in
for i in $(seq 1 100); do [ -s $D/ready ] && break; sleep 0.2; done
PORT=$($PY -c "import json;print(json.loads(open('$D/ready').readline())['port'])")
$PY - <<PYEOF
import json
r=json.loads(open('$D/ready').readline())
lines=["secrets: [passkey]","devices:"]
for d in r['devices']:
    lines.append(f'  - {{ id: {d["id"]}, name: {d["name"]}, address: "{d["address"]}", vars: {{ passkey: "{d["passkey"]}" }} }}')
open('$D/inv.yaml','w').write("\n".join(lines)+"\n")
conn = "connect: { timeout: 30s }" if "$SEC"=="none" else ("connect: { timeout: 30s, security: encrypted }" if "$SEC"=="encrypted" else 'connect: { timeout: 30s, security: authenticated, passkey: "\${passkey}" }')
open('$D/wf.yaml','w').write(f"""name: pairing-cost
defaults: {{ timeout: 10s, retry: {{ attempts: 1 }} }}
steps:
  - scan: {{ timeout: 10s }}
  - {conn}
  - read: {{ id: serial, service: 180A, characteristic: 2A25, as: utf8 }}
  - disconnect
""")
PYEOF
for run in 1 2; do
  /usr/bin/time -f "$SEC run $run: cpu user %U s sys %S s wall %e s" $PROV run $D/wf.yaml --inventory $D/inv.yaml --adapter hci:tcp:127.0.0.1:$PORT \
     --concurrency 1 --bonds $D/bonds.json --report $D/r$run.json --quiet >/dev/null 2>$D/time$run || true
  tail -1 $D/time$run
  $PY - <<PYEOF
import json,statistics
r=json.load(open('$D/r$run.json'))
c=[s['duration_ms'] for d in r['devices'] for s in d['steps'] if s['kind']=='connect']
print("  connect step ms: p50 %.0f min %.0f max %.0f; outcomes %s; security %s; att round trips/device %s" % (statistics.median(c), min(c), max(c), r['summary']['outcomes']['succeeded'], sorted(set(str(d.get('security',{}).get('bond'))+'/'+str(d.get('security',{}).get('method')) for d in r['devices'])), r['summary'].get('att_round_trips_per_device')))
PYEOF
done
exec 3>&-
wait $FLEET 2>/dev/null || true
