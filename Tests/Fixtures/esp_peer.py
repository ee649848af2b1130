#!/usr/bin/env python3
"""A provisioning client on Bumble's Python host that follows esp_prov's logic (ESP-IDF tools/esp_prov,
BLE transport, security 2): the baseline for `provision`'s ESP32 Wi-Fi provisioning.

Per unit, as esp_prov does for its one unit: connect, find the endpoints by their User Descriptions
(0x2901), read proto-ver, secure the session (SRP-6a, then AES-GCM), set the SSID and passphrase, apply,
then wait for the station: sleep TIME_PER_POLL (5 s, as esp_prov), ask the status, until connected or
failed. One request at a time. Where esp_prov handles one unit per run, this runs N of them at once
(`--concurrency`), one pending connection at a time, as a line's script around it at best would.

    bumble_fleet.py --port 9000 --stations 2 --devices 0 --esp-devices 32 --link-latency 7.5ms --state-dir /tmp/esp &
    esp_peer.py --transport tcp-client:127.0.0.1:9001 --devices 32 --concurrency 16

Prints one JSON line: the run's seconds, and per unit its connect, session, set/apply and status seconds.
"""

import argparse
import asyncio
import hashlib
import json
import os
import sys
import time

from bumble import hci
from bumble.core import UUID
from bumble.device import Device, Peer
from bumble.gatt import GATT_CHARACTERISTIC_USER_DESCRIPTION_DESCRIPTOR
from bumble.transport import open_transport

from esp_device import G, H, N, SERVICE, gcm_session, msg, to_bytes  # the .proto schema, SRP group, GCM session: one home

TIME_PER_POLL = 5.0  # esp_prov's wait_wifi_connected


class Unit:
    """One unit's link and session (esp_prov's transport_ble + security2, as a coroutine)."""

    def __init__(self, connection, peer, endpoints):
        self.connection = connection
        self.peer = peer
        self.endpoints = endpoints
        self.seal = self.open = None

    @classmethod
    async def connect(cls, device, address, lock, timeout):
        async with lock:  # one pending LE Create Connection at a time
            connection = await device.connect(hci.Address(address), own_address_type=hci.OwnAddressType.RANDOM, timeout=timeout)
        peer = Peer(connection)
        await peer.request_mtu(247)
        await peer.discover_services([UUID(SERVICE)])
        service = peer.get_services_by_uuid(UUID(SERVICE))[0]
        endpoints = {}
        for characteristic in await service.discover_characteristics():
            for descriptor in await characteristic.discover_descriptors():
                if descriptor.type == GATT_CHARACTERISTIC_USER_DESCRIPTION_DESCRIPTOR:
                    endpoints[bytes(await descriptor.read_value()).decode()] = characteristic
        return cls(connection, peer, endpoints)

    async def send(self, endpoint, data):
        characteristic = self.endpoints[endpoint]
        await self.peer.write_value(characteristic, data, with_response=True)
        return bytes(await self.peer.read_value(characteristic))

    async def session(self, username, pop):
        SessionData = msg("SessionData")
        a = int.from_bytes(os.urandom(32), "big")
        big_a = pow(G, a, N)
        request = SessionData(sec_ver=2)
        request.sec2.msg = 0
        request.sec2.sc0.client_username = username
        request.sec2.sc0.client_pubkey = to_bytes(big_a)
        answer = SessionData.FromString(await self.send("prov-session", request.SerializeToString())).sec2.sr0
        big_b, salt = int.from_bytes(answer.device_pubkey, "big"), bytes(answer.device_salt)
        k = int.from_bytes(H(to_bytes(N), to_bytes(G, pad=True)), "big")
        u = int.from_bytes(H(to_bytes(big_a, pad=True), to_bytes(big_b, pad=True)), "big")
        x = int.from_bytes(H(salt, H(username, b":", pop)), "big")
        s = pow((big_b - k * pow(G, x, N)) % N, a + u * x, N)
        key = H(to_bytes(s))
        hng = bytes(p ^ q for p, q in zip(H(to_bytes(N)), H(to_bytes(G, pad=True))))
        m = H(hng, H(username), salt, to_bytes(big_a), to_bytes(big_b), key)
        request = SessionData(sec_ver=2)
        request.sec2.msg = 2
        request.sec2.sc1.client_proof = m
        answer = SessionData.FromString(await self.send("prov-session", request.SerializeToString())).sec2.sr1
        if bytes(answer.device_proof) != H(to_bytes(big_a), m, key):
            raise RuntimeError("the unit's proof does not match")
        self.seal, self.open = gcm_session(key, bytes(answer.device_nonce))

    async def config(self, **payload):
        Payload = msg("WiFiConfigPayload")
        request = Payload(**payload)
        return Payload.FromString(self.open(await self.send("prov-config", self.seal(request.SerializeToString()))))


async def provision(device, address, args, lock):
    timings = {"address": address}
    t = time.monotonic()
    unit = await Unit.connect(device, address, lock, args.timeout)
    timings["connect_s"] = round(time.monotonic() - t, 3)
    t = time.monotonic()
    json.loads(await unit.send("proto-ver", b"---"))
    index = int(address.replace(":", "")[-4:], 16)
    await unit.session(b"wifiprov", f"pop-ESP-{index:04d}".encode())
    timings["session_s"] = round(time.monotonic() - t, 3)
    t = time.monotonic()
    Empty = msg("Empty")
    await unit.config(msg=2, cmd_set_config=msg("CmdSetConfig")(ssid=args.ssid.encode(), passphrase=args.passphrase.encode()))
    await unit.config(msg=4, cmd_apply_config=Empty())
    timings["config_s"] = round(time.monotonic() - t, 3)
    t = time.monotonic()
    while True:
        await asyncio.sleep(args.poll)
        status = (await unit.config(msg=0, cmd_get_status=Empty())).resp_get_status
        if status.sta_state == 1:  # connecting
            continue
        timings["status_s"] = round(time.monotonic() - t, 3)
        timings["joined"] = status.sta_state == 0
        break
    await unit.connection.disconnect()
    return timings


async def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--transport", required=True, help="e.g. tcp-client:127.0.0.1:9001")
    parser.add_argument("--devices", type=int, default=1, help="units ESP-0001..N of the default ESP fleet")
    parser.add_argument("--first", type=int, default=1, help="the first unit's number")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--ssid", default="line-5-iot")
    parser.add_argument("--passphrase", default="demo-line-5-passphrase")
    parser.add_argument("--poll", type=float, default=TIME_PER_POLL, help="seconds before each status request (esp_prov: 5)")
    parser.add_argument("--timeout", type=float, default=30.0)
    args = parser.parse_args()

    addresses = [f"E5:00:00:00:{i >> 8:02X}:{i & 0xFF:02X}" for i in range(args.first, args.first + args.devices)]
    async with await open_transport(args.transport) as (source, sink):
        device = Device.with_hci("esp-peer", hci.Address("C0:5E:E5:00:00:01"), source, sink)
        await device.power_on()
        lock = asyncio.Lock()
        slots = asyncio.Semaphore(args.concurrency)
        results, failures = [], []

        async def one(address):
            async with slots:
                try:
                    results.append(await asyncio.wait_for(provision(device, address, args, lock), args.timeout + 60))
                except Exception as error:  # report, keep going
                    failures.append(f"{address}: {error!r}")

        started = time.monotonic()
        await asyncio.gather(*(one(a) for a in addresses))
        elapsed = time.monotonic() - started
    print(json.dumps({"measurement": "esp-peer", "devices": len(addresses), "joined": sum(r.get("joined", False) for r in results),
                      "seconds": round(elapsed, 3), "results": sorted(results, key=lambda r: r["address"]),
                      "failures": failures}), flush=True)
    return 0 if not failures else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
