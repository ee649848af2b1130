#!/usr/bin/env python3
"""An MCUmgr client on Bumble's Python host, written the way `smpmgr` works: the throughput baseline for
`provision`'s DFU, and the central the SMP fixture's own tests drive.

One request at a time: each waits for its response (or a timeout, then it is sent again) before the
next leaves. Requests are built with the `smp` package's message models (as smpmgr's smpclient builds
them); an image goes up in chunks sized so that each request fits one ATT write (MTU - 3), unless
`--chunk buf` sizes them to the device's MCUmgr buffer (still one at a time, split across writes, for
devices with reassembly). Responses are reassembled across notifications by the header's length.

    bumble_fleet.py --port 9000 --stations 2 --devices 0 --smp-devices 16 --link-latency 7.5ms \\
        --link-rate 400kbit/s --state-dir /tmp/dfu &
    smp_peer.py --transport tcp-client:127.0.0.1:9001 --devices 16 --image app.bin [--chunk mtu|buf]

For every device (DFU-0001... at F1:00:00:00:00:01..., all at once, one pending connection at a time)
it connects, exchanges the MTU, finds the SMP characteristic, subscribes, reads the image state, uploads,
marks the image for test, resets, reconnects once the device is back, checks that the image runs and
confirms it; then it prints one JSON line: per device the upload's seconds and KB/s (image bytes over
the upload's wall time), and the whole run's.
"""

import argparse
import asyncio
import hashlib
import json
import sys
import time

import cbor2
from bumble import hci
from bumble.core import UUID
from bumble.device import Device, Peer
from bumble.transport import open_transport
from smp import header as smpheader
from smp import image_management as img
from smp import os_management as osm

import mcuboot_image

SMP_SERVICE = UUID("8D53DC1D-1DB7-4CD3-868B-8A527460AA84")
SMP_CHARACTERISTIC = UUID("DA2E7828-FBCE-4E01-AE9E-261174997C48")
HEADER_SIZE = smpheader.Header.SIZE


class SMPErrorResponse(Exception):
    """A response with rc (version 1, or SMP-level) or err {group, rc} (version 2)."""

    def __init__(self, body):
        super().__init__(f"SMP error {body}")
        self.body = body
        self.rc = body.get("rc") if "rc" in body else body.get("err", {}).get("rc")
        self.group = body.get("err", {}).get("group")


class SMPClient:
    """One link to an SMP server: requests out as writes without response, responses in as notifications."""

    def __init__(self, connection, peer, characteristic, mtu):
        self.connection = connection
        self.peer = peer
        self.characteristic = characteristic
        self.mtu = mtu
        self.sequence = 0
        self.incoming = bytearray()
        self.responses = asyncio.Queue()
        self.requests_sent = 0
        self.timeouts = 0
        self.upload_bytes_sent = 0
        self.disconnected = asyncio.Event()
        connection.on("disconnection", lambda _reason: self.disconnected.set())

    @classmethod
    async def connect(cls, device, address, timeout=10.0, mtu=517, connect_lock=None):
        """Connects to `address`, exchanges the MTU, finds the SMP characteristic and subscribes to it."""
        async def connect():
            return await device.connect(hci.Address(address), own_address_type=hci.OwnAddressType.RANDOM,
                                        timeout=timeout)
        if connect_lock is not None:
            async with connect_lock:  # one pending LE Create Connection at a time
                connection = await connect()
        else:
            connection = await connect()
        peer = Peer(connection)
        negotiated = await peer.request_mtu(mtu)
        await peer.discover_services([SMP_SERVICE])
        services = peer.get_services_by_uuid(SMP_SERVICE)
        if not services:
            await connection.disconnect()
            raise RuntimeError(f"{address}: no SMP service")
        await services[0].discover_characteristics([SMP_CHARACTERISTIC])
        found = peer.get_characteristics_by_uuid(SMP_CHARACTERISTIC)
        if not found:
            await connection.disconnect()
            raise RuntimeError(f"{address}: no SMP characteristic")
        client = cls(connection, peer, found[0], negotiated)
        await peer.subscribe(found[0], client._on_notification)
        return client

    def _on_notification(self, value):
        self.incoming += bytes(value)
        while len(self.incoming) >= HEADER_SIZE:
            length = int.from_bytes(self.incoming[2:4], "big")
            if len(self.incoming) < HEADER_SIZE + length:
                return
            packet = bytes(self.incoming[:HEADER_SIZE + length])
            del self.incoming[:HEADER_SIZE + length]
            self.responses.put_nowait(packet)

    @property
    def write_size(self):
        return self.mtu - 3

    def next_sequence(self):
        self.sequence = (self.sequence + 1) & 0xFF
        return self.sequence

    async def send_raw(self, packet):
        """Writes `packet` without response, in MTU - 3 pieces."""
        for at in range(0, len(packet), self.write_size):
            await self.peer.write_value(self.characteristic, packet[at:at + self.write_size], with_response=False)
        self.requests_sent += 1

    async def receive(self, sequence, timeout):
        """The next response with `sequence`: (smp Header, CBOR body). Older ones are discarded.
        ConnectionError when the link drops first, asyncio.TimeoutError after `timeout` seconds."""
        async def wait():
            while True:
                packet = await self.responses.get()
                header = smpheader.Header.loads(packet[:HEADER_SIZE])
                if header.sequence == sequence:
                    return header, cbor2.loads(packet[HEADER_SIZE:]) if len(packet) > HEADER_SIZE else {}
        answer = asyncio.ensure_future(wait())
        gone = asyncio.ensure_future(self.disconnected.wait())
        try:
            done, _ = await asyncio.wait({answer, gone}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        finally:
            gone.cancel()
            if not answer.done():
                answer.cancel()
        if answer in done:
            return answer.result()
        if gone in done:
            raise ConnectionError("the link dropped")
        raise asyncio.TimeoutError()

    async def transact(self, message, timeout=2.5, attempts=3):
        """Sends an `smp` request model, waits for its response, sends it again after a timeout."""
        packet = bytes(message.BYTES)
        sequence = packet[6]
        for _ in range(attempts):
            # The same bytes again: a late answer to the first send matches too.
            await self.send_raw(packet)
            try:
                header, body = await self.receive(sequence, timeout)
            except asyncio.TimeoutError:
                self.timeouts += 1
                continue
            if body.get("rc", 0) or "err" in body:
                raise SMPErrorResponse(body)
            return body
        raise asyncio.TimeoutError(f"no answer to {type(message).__name__} after {attempts} attempts")

    def model(self, cls, **fields):
        return cls(sequence=self.next_sequence(), **fields)

    # -- Commands --

    async def echo(self, text):
        return (await self.transact(self.model(osm.EchoWriteRequest, d=text)))["r"]

    async def parameters(self):
        return await self.transact(self.model(osm.MCUMgrParametersReadRequest))

    async def image_state(self):
        return (await self.transact(self.model(img.ImageStatesReadRequest)))["images"]

    async def image_test(self, image_hash):
        return (await self.transact(self.model(img.ImageStatesWriteRequest, hash=image_hash, confirm=False)))["images"]

    async def image_confirm(self, image_hash=None):
        fields = {"confirm": True} if image_hash is None else {"hash": image_hash, "confirm": True}
        return (await self.transact(self.model(img.ImageStatesWriteRequest, **fields)))["images"]

    async def image_erase(self):
        return await self.transact(self.model(img.ImageEraseRequest))

    async def reset(self):
        return await self.transact(self.model(osm.ResetWriteRequest), attempts=1)

    def chunk_size(self, request_size, first, image, image_size, sha, offset):
        """Data bytes that fit one request of at most `request_size` bytes (as smpclient computes it:
        encode the request empty, and the rest is data; CBOR's byte-string length grows by 2 past 255)."""
        fields = {"off": offset, "data": b""}
        if first:
            fields.update(len=image_size, sha=sha, image=0)
        empty = len(img.ImageUploadWriteRequest(**fields).BYTES)
        room = request_size - empty
        return max(1, room - (2 if room > 255 else 1 if room > 23 else 0))

    async def upload(self, image, request_size=None, upgrade=None, progress=None):
        """Uploads `image` one request at a time, each at most `request_size` bytes (default: one write).
        Resumes where the device says (the first request carries len and sha). Returns the final answer."""
        request_size = request_size or self.write_size
        sha = hashlib.sha256(image).digest()
        offset = 0
        first = True
        while True:
            size = self.chunk_size(request_size, first, image, len(image), sha, offset)
            data = image[offset:offset + size]
            fields = {"off": offset, "data": data}
            if first:
                fields.update(len=len(image), sha=sha, image=0)
                if upgrade is not None:
                    fields["upgrade"] = upgrade
            self.upload_bytes_sent += len(data)
            answer = await self.transact(self.model(img.ImageUploadWriteRequest, **fields))
            if "off" not in answer:
                raise RuntimeError(f"upload answer without off: {answer}")
            offset = answer["off"]
            first = offset == 0
            if progress is not None:
                progress(offset)
            if offset >= len(image):
                return answer


def image_hash(image):
    """The SHA-256 TLV an image carries (its hash in MCUmgr's image state)."""
    return mcuboot_image.parse(image).hash


async def update(device, address, image, args, connect_lock):
    """The whole DFU of one device, as smpmgr's `upgrade` does it; returns its measurement."""
    started = time.monotonic()
    client = await SMPClient.connect(device, address, timeout=args.timeout, connect_lock=connect_lock)
    target = image_hash(image)
    request_size = None
    if args.chunk == "buf":
        request_size = (await client.parameters())["buf_size"]
    states = await client.image_state()
    if any(s.get("hash") == target and s.get("active") and s.get("confirmed") for s in states):
        await client.connection.disconnect()
        return {"address": address, "already_current": True}
    upload_started = time.monotonic()
    await client.upload(image, request_size=request_size)
    upload_seconds = time.monotonic() - upload_started
    await client.image_test(target)
    sent, requests, timeouts = client.upload_bytes_sent, client.requests_sent, client.timeouts
    await client.reset()
    # The device drops the link and reboots; connect again once it advertises.
    await asyncio.wait_for(client.disconnected.wait(), args.timeout)
    client = await SMPClient.connect(device, address, timeout=args.timeout + 30, connect_lock=connect_lock)
    states = await client.image_state()
    running = next((s for s in states if s.get("active")), {})
    if running.get("hash") != target:
        await client.connection.disconnect()
        raise RuntimeError(f"{address}: running {running.get('version')} after the reset, not the upload")
    await client.image_confirm()
    await client.connection.disconnect()
    return {"address": address, "upload_seconds": round(upload_seconds, 3),
            "upload_kBps": round(len(image) / upload_seconds / 1000, 2), "bytes_sent": sent, "requests": requests,
            "timeouts": timeouts, "total_seconds": round(time.monotonic() - started, 3)}


async def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--transport", required=True, help="e.g. tcp-client:127.0.0.1:9001")
    parser.add_argument("--devices", type=int, default=1, help="devices DFU-0001..N of the default SMP fleet")
    parser.add_argument("--image", required=True, help="the MCUboot image to upload")
    parser.add_argument("--chunk", choices=["mtu", "buf"], default="mtu",
                        help="mtu: each request fits one ATT write (smpmgr's baseline); buf: each is as large as "
                             "the device's MCUmgr buffer (still one at a time)")
    parser.add_argument("--timeout", type=float, default=10.0)
    args = parser.parse_args()

    with open(args.image, "rb") as f:
        image = f.read()
    addresses = [f"F1:00:00:00:{i >> 8:02X}:{i & 0xFF:02X}" for i in range(1, args.devices + 1)]
    async with await open_transport(args.transport) as (source, sink):
        device = Device.with_hci("smp-peer", hci.Address("C0:5E:E7:00:00:01"), source, sink)
        await device.power_on()
        connect_lock = asyncio.Lock()
        failures = []
        results = []

        async def one(address):
            try:
                results.append(await update(device, address, image, args, connect_lock))
            except Exception as error:  # report, keep going
                failures.append(f"{address}: {error!r}")

        started = time.monotonic()
        await asyncio.gather(*(one(a) for a in addresses))
        elapsed = time.monotonic() - started
    uploads = [r for r in results if "upload_seconds" in r]
    rates = sorted(r["upload_kBps"] for r in uploads)
    print(json.dumps({
        "measurement": "smp-peer-dfu", "chunk": args.chunk, "devices": len(addresses), "updated": len(uploads),
        "image_bytes": len(image), "seconds": round(elapsed, 2),
        "upload_kBps_per_device":
            {"min": rates[0], "median": rates[len(rates) // 2], "max": rates[-1]} if rates else None,
        "aggregate_upload_kBps":
            round(sum(len(image) / r["upload_seconds"] for r in uploads) / 1000, 2) if uploads else None,
        "results": sorted(results, key=lambda r: r["address"]), "failures": failures,
    }), flush=True)
    return 0 if not failures else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
