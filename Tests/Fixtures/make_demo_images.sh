#!/bin/sh
# Builds the demo line's firmware images (inventory/images/) with MCUboot's imgtool (PyPI, in .venv):
# unsigned images with the SHA-256 TLV, as `imgtool sign` makes them without a key. The body is a
# deterministic pseudo-random application (same bytes every time), so the committed images and their
# hashes in inventory/dfu-line.yaml stay what this script makes.
#   make venv && Tests/Fixtures/make_demo_images.sh
set -eu
cd "$(dirname "$0")/../.."
IMGTOOL=${IMGTOOL:-.venv/bin/imgtool}
PY=${PYTHON:-.venv/bin/python3}
out=inventory/images
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for v in 2.4.1 2.5.0; do
  "$PY" -c "
import hashlib, sys
seed = b'sensor-v2 application $v'
data = b''
while len(data) < 48 * 1024:
    seed = hashlib.sha256(seed).digest()
    data += seed
open(sys.argv[1], 'wb').write(data[:48 * 1024])
" "$tmp/app-$v.bin"
  "$IMGTOOL" sign --version "$v" --header-size 0x200 --pad-header --slot-size 0x40000 --align 4 \
    "$tmp/app-$v.bin" "$out/sensor-v2-$v.bin"
done
ls -l "$out"
