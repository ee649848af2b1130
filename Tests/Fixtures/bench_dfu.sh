#!/usr/bin/env bash
# DFU throughput on the Bumble SMP fixture: provision (release build, when it has the dfu step) and the
# smpmgr-like peer, 1 and 16 devices, the issue's conditions; every figure against its physical bound.
# See bench_dfu.py (--help) for the options, e.g. --devices 16 --sides baseline --chunk mtu,buf.
#
#   swift build -c release --product provision && Tests/Fixtures/bench_dfu.sh [options]
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${PROVISION_PYTHON:-.venv/bin/python3}
exec "$PY" Tests/Fixtures/bench_dfu.py "$@"
