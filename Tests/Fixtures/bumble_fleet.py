#!/usr/bin/env python3
"""A fleet of virtual `sensor-v2` peripherals (REFERENCE-DEVICE.md) for testing the HCI host.

One virtual controller is exposed to the host under test over Bumble's tcp-server transport; every
peripheral runs Bumble's own host stack on its own virtual controller, all on one LocalLink.

    bumble_fleet.py --port 0 --devices 8 --state-dir /tmp/fleet
    bumble_fleet.py --port 9000 --stations 2 --config fleet.json --state-dir /tmp/fleet

On start it prints one JSON line to stdout: {"event": "ready", "port": P, "ports": [P, ...],
"devices": [...]}. Every station controller (--stations, default 1) hears every device: one per
adapter of a multi-adapter station, or one for baseline_provision.py.
Each peripheral writes its device-side state to STATE_DIR/<id>.json (atomically) on every change and
on SIGTERM.

Config file: {"devices": [{"id": "SN-0001", "name": "SNS-0001", "address": "F0:00:00:00:00:01",
"firmware": "2.4.1", "battery": 87, "faults": ["silent" | "ack_loss" | "drop_on_commit"]}]}

Faults: silent (never advertises), ack_loss (commands run, acks never sent), drop_on_commit (the
device drops the link, reason 0x13, instead of executing a commit).

Workarounds for limits of Bumble's virtual controller live here, not in the product:
- LE Create Connection Cancel answers success but leaves the connection pending: the host-facing
  controller sends the Connection Complete (status 0x02) that a real controller sends.
- Reset does not clear anything: the host-facing controller drops its links and pending connection.
- Its tcp-server leaves Nagle on: the listening socket gets TCP_NODELAY (inherited by the client socket).
"""

import argparse
import asyncio
import hashlib
import json
import logging
import os
import random
import signal
import socket
import sys

from bumble import hci, ll
from bumble.controller import Controller
from bumble.device import Device
from bumble.gatt import Characteristic, CharacteristicValue, Service
from bumble.link import LocalLink
from bumble.transport.tcp_server import open_tcp_server_transport_with_socket

logger = logging.getLogger("bumble_fleet")


class StationController(Controller):
    """The controller the host under test drives, with real-controller behaviour where Bumble's differs."""

    def on_hci_reset_command(self, command):
        # A reset controller holds no links and initiates nothing (Vol 4 Part E 7.3.2).
        for connection in list(self.le_connections.values()):
            connection.send_ll_control_pdu(ll.TerminateInd(hci.HCI_ErrorCode.REMOTE_USER_TERMINATED_CONNECTION_ERROR))
            self.le_connections.pop(connection.peer_address, None)
        self.pending_le_connection = None
        self.le_scan_enable = False
        return super().on_hci_reset_command(command)

    def on_hci_le_create_connection_cancel_command(self, command):
        pending = self.pending_le_connection
        if pending is None:
            return hci.HCI_StatusReturnParameters(hci.HCI_ErrorCode.COMMAND_DISALLOWED_ERROR)
        self.pending_le_connection = None
        event = hci.HCI_LE_Connection_Complete_Event(
            status=hci.HCI_ErrorCode.UNKNOWN_CONNECTION_IDENTIFIER_ERROR,
            connection_handle=0,
            role=hci.Role.CENTRAL,
            peer_address_type=pending.peer_address_type,
            peer_address=pending.peer_address,
            connection_interval=0,
            peripheral_latency=0,
            supervision_timeout=0,
            central_clock_accuracy=0,
        )
        # Scheduled so that it follows the Command Complete of the cancel.
        asyncio.get_running_loop().call_soon(self.send_hci_packet, event)
        return hci.HCI_StatusReturnParameters(hci.HCI_ErrorCode.SUCCESS)


def write_json_atomically(path, document):
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(document, f, indent=1, sort_keys=True)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


class SensorV2:
    """One sensor-v2 peripheral: GATT database, control commands and acks, device-side state."""

    def __init__(self, spec, link, state_dir):
        self.spec = spec
        self.id = spec["id"]
        self.name = spec["name"]
        self.address = spec["address"]
        self.firmware = spec.get("firmware", "2.4.1")
        self.battery = int(spec.get("battery", 87))
        self.faults = set(spec.get("faults", []))
        self.state_path = os.path.join(state_dir, f"{self.id}.json")
        self.config = None
        self.state = 0
        self.blob_expected = None
        self.blob = bytearray()
        self.blob_ended = False
        self.commits = 0
        self.connections = 0
        self.disconnections = 0
        self.connected = False
        self.fff1_writes = []
        self.acks_sent = []
        self.acks_lost = []
        self.drops = 0
        self.mtu = 23
        self.controller = Controller(f"ctl-{self.id}", link=link)
        self.device = Device.with_hci(self.name, hci.Address(self.address), self.controller, self.controller)
        self._build_gatt()

    def _build_gatt(self):
        P = Characteristic.Properties
        R = Characteristic.READABLE
        W = Characteristic.WRITEABLE
        self.fff3 = Characteristic("FFF3", P.NOTIFY, R, b"")
        self.battery_char = Characteristic("2A19", P.READ | P.NOTIFY, R, bytes([self.battery]))
        self.device.add_services([
            Service("180A", [
                Characteristic("2A29", P.READ, R, b"Acme"),
                Characteristic("2A24", P.READ, R, b"sensor-v2"),
                Characteristic("2A25", P.READ, R, self.id.encode()),
                Characteristic("2A26", P.READ, R, self.firmware.encode()),
            ]),
            Service("180F", [self.battery_char]),
            Service("FFF0", [
                Characteristic("FFF1", P.WRITE, W, CharacteristicValue(write=self._on_control)),
                Characteristic("FFF2", P.READ, R, CharacteristicValue(read=lambda _c: bytes([self.state]))),
                self.fff3,
                Characteristic("FFF4", P.WRITE_WITHOUT_RESPONSE, W, CharacteristicValue(write=self._on_blob)),
            ]),
        ])

    def advertising_data(self):
        name = self.name.encode()
        return bytes([2, 0x01, 0x06, len(name) + 1, 0x09]) + name + bytes([3, 0x02, 0xF0, 0xFF])

    async def start(self):
        await self.device.power_on()
        self.device.on("connection", self._on_connection)
        if "silent" not in self.faults:
            await self.device.start_advertising(
                advertising_data=self.advertising_data(), auto_restart=True,
                advertising_interval_min=20, advertising_interval_max=20)
        self.save()

    def _on_connection(self, connection):
        self.connections += 1
        self.connected = True
        connection.on("disconnection", lambda reason: self._on_disconnection(reason))
        connection.on("connection_att_mtu_update", lambda: self._on_mtu(connection))
        self.save()

    def _on_mtu(self, connection):
        self.mtu = connection.att_mtu
        self.save()

    def _on_disconnection(self, reason):
        self.connected = False
        self.disconnections += 1
        self.last_disconnect_reason = reason
        self.save()

    def _on_blob(self, _connection, value):
        if self.blob_expected is not None and not self.blob_ended:
            self.blob.extend(value)
            self.save()

    def _on_control(self, connection, value):
        value = bytes(value)
        self.fff1_writes.append(value.hex())
        if value[:1] == b"\x02" and "drop_on_commit" in self.faults:
            self.drops += 1
            self.save()
            asyncio.get_running_loop().create_task(self._drop(connection))
            return
        ack = self._execute(value)
        self.save()
        asyncio.get_running_loop().create_task(self._send_ack(connection, ack))

    def _execute(self, value):
        if not value:
            return bytes([0x00, 0xFF])
        command = value[0]
        if command == 0x01:
            config = value[1:]
            if not 1 <= len(config) <= 200:
                return b"\x01\x01"
            self.config = config
            if self.state < 1:
                self.state = 1
            return b"\x01\x00"
        if command == 0x03:
            if len(value) != 5:
                return b"\x03\x01"
            self.blob_expected = int.from_bytes(value[1:5], "little")
            self.blob = bytearray()
            self.blob_ended = False
            return b"\x03\x00"
        if command == 0x04:
            if self.blob_expected is None or len(self.blob) != self.blob_expected:
                return b"\x04\x01"
            self.blob_ended = True
            return b"\x04\x00"
        if command == 0x02:
            blob_ok = self.blob_expected is None or self.blob_ended
            if self.config is None or not blob_ok:
                return b"\x02\x01"
            self.state = 2
            self.commits += 1
            return b"\x02\x00"
        return bytes([command, 0xFF])

    async def _drop(self, connection):
        await asyncio.sleep(0.005)  # after the write response
        try:
            await connection.disconnect(hci.HCI_ErrorCode.REMOTE_USER_TERMINATED_CONNECTION_ERROR)
        except Exception as error:
            logger.info("%s: drop failed: %s", self.id, error)

    async def _send_ack(self, connection, ack):
        # The ack follows the write response by 5–50 ms.
        await asyncio.sleep(random.uniform(0.005, 0.050))
        if "ack_loss" in self.faults:
            self.acks_lost.append(ack.hex())
            self.save()
            return
        try:
            await self.device.notify_subscriber(connection, self.fff3, ack)
            self.acks_sent.append(ack.hex())
        except Exception as error:  # the link may be gone
            logger.info("%s: ack %s not sent: %s", self.id, ack.hex(), error)
        self.save()

    def snapshot(self):
        return {
            "id": self.id,
            "name": self.name,
            "address": self.address,
            "firmware": self.firmware,
            "faults": sorted(self.faults),
            "config": self.config.hex() if self.config is not None else None,
            "state": self.state,
            "blob_expected": self.blob_expected,
            "blob_bytes": len(self.blob),
            "blob_sha256": hashlib.sha256(bytes(self.blob)).hexdigest(),
            "blob_ended": self.blob_ended,
            "commits": self.commits,
            "connections": self.connections,
            "disconnections": self.disconnections,
            "connected": self.connected,
            "mtu": self.mtu,
            "fff1_writes": self.fff1_writes,
            "acks_sent": self.acks_sent,
            "acks_lost": self.acks_lost,
            "drops": self.drops,
        }

    def save(self):
        write_json_atomically(self.state_path, self.snapshot())


def default_devices(count, old_firmware=(), silent=(), ack_loss=(), drop_on_commit=()):
    devices = []
    for i in range(1, count + 1):
        faults = []
        if i in silent:
            faults.append("silent")
        if i in ack_loss:
            faults.append("ack_loss")
        if i in drop_on_commit:
            faults.append("drop_on_commit")
        devices.append({
            "id": f"SN-{i:04d}",
            "name": f"SNS-{i:04d}",
            "address": f"F0:00:00:00:{i >> 8:02X}:{i & 0xFF:02X}",
            "firmware": "1.9.0" if i in old_firmware else "2.4.1",
            "battery": 50 + (i * 7) % 50,
            "faults": faults,
        })
    return devices


def parse_indices(text):
    return {int(x) for x in text.split(",") if x.strip()} if text else set()


async def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--port", type=int, default=0, help="TCP port for the host (0: pick a free one)")
    parser.add_argument("--host", default="127.0.0.1", help="interface to listen on")
    parser.add_argument("--config", help="JSON file with the devices")
    parser.add_argument("--devices", type=int, default=8, help="number of default devices (without --config)")
    parser.add_argument("--silent", default="", help="indices (1-based) of devices that never advertise")
    parser.add_argument("--ack-loss", default="", help="indices of devices whose acks are lost")
    parser.add_argument("--old-firmware", default="", help="indices of devices running firmware 1.9.0")
    parser.add_argument("--drop-on-commit", default="", help="indices of devices that drop the link on commit")
    parser.add_argument("--stations", type=int, default=1,
                        help="station controllers (one per adapter or per baseline host), on PORT, PORT+1, ... "
                             "(all picked freely with --port 0)")
    parser.add_argument("--state-dir", required=True, help="directory for the per-device state files")
    parser.add_argument("--exit-on-stdin-eof", action="store_true",
                        help="stop when stdin closes (the launching test process died)")
    parser.add_argument("--log-level", default="WARNING")
    args = parser.parse_args()
    logging.basicConfig(level=args.log_level, stream=sys.stderr,
                        format="%(asctime)s.%(msecs)03d %(name)s %(message)s", datefmt="%H:%M:%S")

    if args.config:
        with open(args.config) as f:
            devices = json.load(f)["devices"]
    else:
        devices = default_devices(args.devices, parse_indices(args.old_firmware),
                                  parse_indices(args.silent), parse_indices(args.ack_loss),
                                  parse_indices(args.drop_on_commit))
    os.makedirs(args.state_dir, exist_ok=True)

    link = LocalLink()
    sensors = [SensorV2(spec, link, args.state_dir) for spec in devices]
    for sensor in sensors:
        await sensor.start()

    async def station(name, port, public_address):
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        # Accepted sockets inherit it: without it Nagle holds a reply behind the Number Of Completed
        # Packets event sent just before it, for a delayed ACK (~40 ms per ATT round trip).
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.bind((args.host, port))
        sock.listen()
        transport = await open_tcp_server_transport_with_socket(sock)
        StationController(name, host_source=transport.source, host_sink=transport.sink, link=link,
                          public_address=public_address)
        return transport, sock.getsockname()[1]

    transports = []
    ports = []
    for i in range(max(1, args.stations)):
        transport, port = await station(f"station{i + 1}", args.port + i if args.port else 0,
                                        f"00:AA:00:00:00:{i + 1:02X}")
        transports.append(transport)
        ports.append(port)

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    if args.exit_on_stdin_eof:
        def on_stdin():
            if not os.read(sys.stdin.fileno(), 4096):
                loop.remove_reader(sys.stdin.fileno())
                stop.set()
        loop.add_reader(sys.stdin.fileno(), on_stdin)

    print(json.dumps({
        "event": "ready",
        "port": ports[0],
        "ports": ports,
        "devices": [{"id": s.id, "name": s.name, "address": s.address, "state_file": s.state_path,
                     "faults": sorted(s.faults), "firmware": s.firmware} for s in sensors],
    }), flush=True)

    await stop.wait()
    for sensor in sensors:
        sensor.save()
    for t in transports:
        await t.close()


if __name__ == "__main__":
    asyncio.run(main())
