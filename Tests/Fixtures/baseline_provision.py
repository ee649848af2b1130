#!/usr/bin/env python3
"""Throughput baseline: the sensor-v2 provisioning sequence on Bumble's own host stack.

Drives a fleet started with `bumble_fleet.py --stations 2` through its second station controller
(the same kind of virtual controller, over the same TCP transport, that the Swift host gets), with
asyncio concurrency N and one pending connection at a time (as a controller allows), and prints one
JSON line: devices per minute and the process's CPU time per device.

    bumble_fleet.py --port 9000 --stations 2 --devices 16 --state-dir /tmp/fleet &
    baseline_provision.py --transport tcp-client:127.0.0.1:9001 --devices 16 --concurrency 4

The sequence is the one in docs/devices/sensor-v2.md: connect by address, exchange MTU, discover every
service and characteristic, read 2A25 (verify the id) and 2A26 (verify 2.x), subscribe FFF3,
01 <config> / ack, 03 <len> / ack, blob on FFF4 without response in MTU-3 chunks, 04 / ack, 02 / ack,
read FFF2 == 02, disconnect. It is what a test engineer would write with Bumble, no more tuned than that.

CPU: `cpu_seconds` is the whole process (interpreter start and imports included, as for any host
process), `cpu_seconds_provisioning` the time from the first connect to the last device; both also per
device in the run.
"""

import argparse
import asyncio
import json
import resource
import sys
import time

from bumble import hci
from bumble.core import UUID
from bumble.device import Device, Peer
from bumble.transport import open_transport


async def provision(device, connect_lock, address, serial, blob, timeout):
    async with connect_lock:  # one pending LE Create Connection at a time
        connection = await device.connect(hci.Address(address), own_address_type=hci.OwnAddressType.RANDOM,
                                          timeout=timeout)
    try:
        peer = Peer(connection)
        mtu = await peer.request_mtu(247)
        await peer.discover_services()
        for service in peer.services:
            await service.discover_characteristics()

        def characteristic(uuid):
            found = peer.get_characteristics_by_uuid(UUID(uuid))
            if not found:
                raise RuntimeError(f"{address}: no {uuid}")
            return found[0]

        if (await peer.read_value(characteristic("2A25"))).decode() != serial:
            raise RuntimeError(f"{address}: serial mismatch")
        if not (await peer.read_value(characteristic("2A26"))).decode().startswith("2."):
            raise RuntimeError(f"{address}: unsupported firmware")
        acks = asyncio.Queue()
        await peer.subscribe(characteristic("FFF3"), lambda value: acks.put_nowait(bytes(value)))
        control = characteristic("FFF1")

        async def command(payload):
            await peer.write_value(control, payload, with_response=True)
            ack = await asyncio.wait_for(acks.get(), 5)
            if ack != bytes([payload[0], 0]):
                raise RuntimeError(f"{address}: ack {ack.hex()} for {payload[:1].hex()}")

        await command(b"\x01" + serial.encode())
        await command(b"\x03" + len(blob).to_bytes(4, "little"))
        blob_char = characteristic("FFF4")
        chunk = mtu - 3
        for offset in range(0, len(blob), chunk):
            await peer.write_value(blob_char, blob[offset:offset + chunk], with_response=False)
        await command(b"\x04")
        await command(b"\x02")
        if await peer.read_value(characteristic("FFF2")) != b"\x02":
            raise RuntimeError(f"{address}: not provisioned")
    finally:
        await connection.disconnect()


async def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--transport", required=True, help="e.g. tcp-client:127.0.0.1:9100")
    parser.add_argument("--devices", type=int, default=8, help="devices 1..N of the default fleet")
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument("--blob-size", type=int, default=2048)
    parser.add_argument("--timeout", type=float, default=10.0)
    args = parser.parse_args()

    blob = bytes((i * 31 + 7) & 0xFF for i in range(args.blob_size))
    targets = [(f"F0:00:00:00:{i >> 8:02X}:{i & 0xFF:02X}", f"SN-{i:04d}") for i in range(1, args.devices + 1)]
    async with await open_transport(args.transport) as (source, sink):
        device = Device.with_hci("baseline", hci.Address("C0:BA:5E:00:00:01"), source, sink)
        await device.power_on()
        connect_lock = asyncio.Lock()
        semaphore = asyncio.Semaphore(args.concurrency)
        failures = []

        async def one(address, serial):
            async with semaphore:
                try:
                    await provision(device, connect_lock, address, serial, blob, args.timeout)
                except Exception as error:  # report, keep going
                    failures.append(f"{address}: {error!r}")

        started = time.monotonic()
        cpu_started = time.process_time()
        await asyncio.gather(*(one(a, s) for a, s in targets))
        elapsed = time.monotonic() - started
        cpu_provisioning = time.process_time() - cpu_started
    done = len(targets) - len(failures)
    usage = resource.getrusage(resource.RUSAGE_SELF)
    cpu = usage.ru_utime + usage.ru_stime
    print(json.dumps({
        "measurement": "bumble-baseline-provision",
        "devices": len(targets),
        "provisioned": done,
        "concurrency": args.concurrency,
        "seconds": round(elapsed, 2),
        "devices_per_minute": round(done / elapsed * 60, 1) if elapsed > 0 else None,
        "cpu_seconds": round(cpu, 3),
        "cpu_ms_per_device": round(cpu / len(targets) * 1000, 2) if targets else None,
        "cpu_seconds_provisioning": round(cpu_provisioning, 3),
        "cpu_ms_per_device_provisioning": round(cpu_provisioning / len(targets) * 1000, 2) if targets else None,
        "failures": failures,
    }), flush=True)
    return 0 if not failures else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
