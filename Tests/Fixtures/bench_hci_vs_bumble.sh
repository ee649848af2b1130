#!/usr/bin/env bash
# provision (HCI host over hci:tcp, release build) against the Bumble-Python baseline on paced Bumble
# fleets: advertising 100 ms and 1 s × link latency 0, 7.5 ms and 25 ms each way × concurrency 1, 4, 16.
# See bench_hci_vs_bumble.py (--help) for the options, e.g. --quick, --adv 1s --latency 25ms --concurrency 16.
#
#   swift build -c release --product provision && Tests/Fixtures/bench_hci_vs_bumble.sh [DEVICES] [options]
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${PROVISION_PYTHON:-.venv/bin/python3}
exec "$PY" Tests/Fixtures/bench_hci_vs_bumble.py "$@"
