#!/usr/bin/env python3
"""A fleet of virtual `sensor-v2` peripherals (docs/devices/sensor-v2.md) for testing the HCI host.

Station controllers are exposed to hosts over Bumble's tcp-server transport; every peripheral runs
Bumble's own host stack on its own virtual controller, all on one virtual radio link (fleet_radio.py).

    bumble_fleet.py --port 0 --devices 8 --state-dir /tmp/fleet
    bumble_fleet.py --port 9000 --stations 2 --config fleet.json --state-dir /tmp/fleet
    bumble_fleet.py --port 0 --devices 48 --adv-interval 1s --link-latency 7.5ms-25ms --state-dir /tmp/fleet

On start it prints one JSON line to stdout: {"event": "ready", "port": P, "ports": [P, ...],
"devices": [...], "radio": {...}, "stations": {...}}. Every station controller (--stations, default 1)
hears every device: one per adapter of a multi-adapter station, or one for baseline_provision.py.
Each peripheral writes its device-side state to STATE_DIR/<id>.json (atomically) on every change and
on SIGTERM.

Radio timing (defaults: today's fast, instant fixture):
  --adv-interval D        advertising interval of every device (default 20ms); each event adds advDelay,
                          a random 0-10 ms, so devices drift; the first event comes at a random phase.
  --link-latency D[-D]    delay of every LL PDU each way (a value, or a range drawn per PDU), as if
                          each waited for a connection event (one handed over while earlier ones are
                          still on the air follows them in the same event); order kept per link and
                          direction; airtime added at the link's data length and PHY. 0 (default): instant.
  --link-rate R           bandwidth of each direction of every link, e.g. 400kbit/s: a PDU holds the air
                          for at least its bytes at that rate (default: the PHY's alone).
  --seed N                seeds advDelay, link delays, ack delays and ack loss (default 1).
Connections complete at the target's next advertising event heard inside the initiator's scan window.

Station controllers (what a real controller does; see fleet_radio.py):
  --fal-size N            Filter Accept List entries (default 8).
  --max-links N           links held at once; beyond, Connection Limit Exceeded (0x09).
  --max-links-at WHERE    `create` (Command Status of LE Create Connection, default) or `complete`
                          (LE Connection Complete).
  --no-scan-while-initiating
                          LE Read Supported States says scanning while initiating is not supported, and
                          the combination is refused with Command Disallowed (0x0C).
  --controller KIND       `bumble` (default) or `zephyr`: a Zephyr-like controller (manufacturer 0x05F1,
                          BD_ADDR zero, vendor Read Static Addresses giving station N the static
                          address C4:5A:00:00:00:0N, 251-byte ACL buffers; see fleet_radio.py).
  --no-static-address     zephyr stations without Read Static Addresses: no address of their own.
  --extended              station controllers have extended advertising (LE Set Extended Scan
                          Parameters/Enable, LE Extended Create Connection; coded PHY): they hear and
                          connect devices that advertise only with extended PDUs.
  --acl-buffers LENxN     LE ACL buffers of every station controller (default 27x64; zephyr 251x10).
  --station-fault [S:]KIND@N
                          after the Nth connection a station makes (every station, or station S):
                          `hardware-error` (its links drop, a Hardware Error event) or `restart` (its
                          links drop and it closes the host's connection, taking a new one on the same
                          port). Repeatable.

Link timing by connection interval:
  --pace-by-interval      every LL PDU waits for its link's next connection event (the interval the
                          host asked for); an event carries what fits before the next one. Replaces
                          --link-latency for links.

Devices:
  --silent, --ack-loss, --old-firmware, --drop-on-commit INDICES   faults by 1-based index (below)
  --ext-adv PHY           every device advertises only with extended advertising (ADV_EXT_IND and an
                          AUX_ADV_IND on the secondary PHY `1M`, `2M` or `coded`); per device: `ext_adv`.
  --param-request MIN-MAX@VIA   every device asks for other connection parameters 100 ms after a
                          central connects: interval MIN-MAX (e.g. 30ms-50ms), latency 0, timeout 4s,
                          VIA `l2cap` (Connection Parameter Update Request) or `ll` (its controller's
                          Connection Parameters Request procedure). The result is in its state file.
  --ack-loss-rate P       every device loses each ack with probability P (seeded)
  --quirk uuid128         every device declares its services and characteristics (180A, 2A25, FFF0, ...)
                          in 128-bit form (legal; defeats discovery by 16-bit service UUID)

Security (Bumble's own Security Manager on the device side; see SECURITY below):
  --security LEVEL        none (default), encrypted or authenticated: what every device's control (FFF1)
                          and blob (FFF4) characteristics need
  --wrong-passkey, --forget-bond, --security-request INDICES   security faults and options by index

Config file: {"devices": [{"id": "SN-0001", "name": "SNS-0001", "address": "F0:00:00:00:00:01",
"firmware": "2.4.1", "battery": 87, "adv_interval": "1s", "quirks": ["uuid128"],
"security": "authenticated", "passkey": "123456", "security_request": true,
"faults": ["silent" | "ack_loss" | "ack_loss:0.3" | "drop_on_commit" | "wrong_passkey" | "forget_bond"]}]}

Faults: silent (never advertises), ack_loss (commands run, acks never sent), ack_loss:P (each ack lost
with probability P), drop_on_commit (the device drops the link, reason 0x13, instead of executing a
commit), wrong_passkey (the device displays a passkey other than its `passkey`), forget_bond (the device
forgets every bond as soon as it is made: a later link's encryption fails with PIN or Key Missing).

SECURITY: `encrypted` devices pair with Just Works (IO capability NoInputNoOutput); `authenticated` ones
display their passkey (DisplayOnly, MITM required; the passkey is each device's `passkey`, by default
100000 + its index) and refuse FFF1/FFF4 writes on a link whose key is not MITM-protected (ATT
Insufficient Authentication; Bumble itself counts every encrypted LE link as authenticated). Both need
an encrypted link for FFF1 and FFF4 (ATT Insufficient Encryption), keep bonds in memory for the fleet's
life, and record in their state file each pairing (method, MITM, bonded), each pairing failure, each
encryption of a link, and whether each FFF1 write and FFF4 chunk arrived encrypted. `security_request`:
the device sends a Security Request as soon as a central connects.

SMP devices (--smp-devices N, --smp-config FILE, --smp-*): Zephyr-like MCUmgr peripherals with an
MCUboot bootloader, on the same radio; see smp_device.py. They appear in the ready line as "smp_devices".

ESP units (--esp-devices N, --esp-*): ESP32-like units running Wi-Fi provisioning over BLE (protocomm
security 0/1/2, a virtual access point); see esp_device.py. They appear in the ready line as "esp_devices".

Workarounds for limits of Bumble's virtual controller live here and in fleet_radio.py, not in the product:
- LE Create Connection Cancel answers success but leaves the connection pending: the station controller
  sends the Connection Complete (status 0x02) that a real controller sends.
- Reset does not clear anything: the station controller drops its links, pending connection, scanning
  and Filter Accept List.
- It ignores the Filter Accept List, scan windows, supported states and LE Set PHY; it reads the
  advertising interval in the wrong unit. See fleet_radio.py.
- Its tcp-server leaves Nagle on: the listening socket gets TCP_NODELAY (inherited by the client socket).
"""

import argparse
import asyncio
import hashlib
import json
import logging
import os
import random
import re
import signal
import socket
import sys

from bumble import hci
from bumble.att import ATT_Error, ErrorCode
from bumble.core import UUID
from bumble.device import Device
from bumble.gatt import Characteristic, CharacteristicValue, Service
from bumble.pairing import PairingConfig, PairingDelegate
from bumble.transport.tcp_server import open_tcp_server_transport_with_socket

import esp_device
import smp_device
from fleet_radio import LinkTiming, PacedController, PacedLink, StationController, ZephyrStationController

logger = logging.getLogger("bumble_fleet")

DEFAULT_ADV_INTERVAL = 0.020
QUIRKS = {"uuid128"}
# Secondary PHYs of extended advertising (LE PHY codes).
EXT_ADV_PHYS = {"1M": 1, "2M": 2, "coded": 3}
SECURITY_LEVELS = ("none", "encrypted", "authenticated")
SECURITY_FAULTS = {"wrong_passkey", "forget_bond"}
# The Bluetooth Base UUID (Vol 3 Part B 2.5.1), for 16-bit UUIDs written out in 128-bit form.
BASE_UUID = "0000{:s}-0000-1000-8000-00805F9B34FB"


def parse_duration(text):
    """Seconds in `text`: a number with a unit (us, ms, s), e.g. `7.5ms`, `1s`; or `0`."""
    if text.strip() == "0":
        return 0.0
    match = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]*)?)\s*(us|ms|s)\s*", text)
    if not match:
        raise ValueError(f"`{text}` is not a duration: write a number and a unit, e.g. 100ms, 1s, 7.5ms")
    return float(match.group(1)) * {"us": 1e-6, "ms": 1e-3, "s": 1.0}[match.group(2)]


def parse_latency(text):
    """(low, high) seconds from `7.5ms` or `7.5ms-25ms`."""
    low, _, high = text.partition("-")
    lo = parse_duration(low)
    hi = parse_duration(high) if high else lo
    if hi < lo:
        raise ValueError(f"`{text}`: the range ends before it starts")
    return lo, hi


def argument(parse):
    """`parse` as an argparse type: its ValueError becomes the message argparse prints."""
    def convert(text):
        try:
            return parse(text)
        except ValueError as error:
            raise argparse.ArgumentTypeError(str(error)) from None
    return convert


def encrypted(connection):
    """Whether `connection` is encrypted (False for none: the fixture's own tests call handlers without one)."""
    return bool(getattr(connection, "encryption", 0))


def write_json_atomically(path, document):
    # Readers (tests, the benchmark) are processes on this machine: the rename makes the new state
    # visible whole. No fsync: it cost milliseconds per blob chunk on a busy machine, in the radio's time.
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(document, f, indent=1, sort_keys=True)
    os.replace(tmp, path)


async def advertise_service(device, service_uuid, name, interval):
    """Legacy advertising of a 128-bit service and the first 8 bytes of the name, every `interval` seconds
    (the SMP and ESP units). Advertising comes back after a disconnection by the device's own hand, not
    Bumble's auto restart: a rebooting device must stay silent."""
    uuid = bytes(UUID(service_uuid).to_bytes(force_128=True))
    short = name.encode()[:8]
    data = bytes([2, 0x01, 0x06, len(uuid) + 1, 0x07]) + uuid + bytes([len(short) + 1, 0x09]) + short
    await device.start_advertising(advertising_data=data, auto_restart=False,
                                   advertising_interval_min=interval * 1000, advertising_interval_max=interval * 1000)


class SensorV2:
    """One sensor-v2 peripheral: GATT database, control commands and acks, device-side state."""

    def __init__(self, spec, link, state_dir, seed=1, adv_interval=DEFAULT_ADV_INTERVAL, quirks=(),
                 ack_loss_rate=0.0, param_request=None, ext_adv=None):
        self.spec = spec
        self.id = spec["id"]
        self.name = spec["name"]
        self.address = spec["address"]
        self.firmware = spec.get("firmware", "2.4.1")
        self.battery = int(spec.get("battery", 87))
        self.faults = list(spec.get("faults", []))
        self.quirks = sorted(set(spec.get("quirks", [])) | set(quirks))
        unknown = set(self.quirks) - QUIRKS
        if unknown:
            raise ValueError(f"{self.id}: unknown quirk(s) {sorted(unknown)}; known: {sorted(QUIRKS)}")
        self.adv_interval = parse_duration(spec["adv_interval"]) if "adv_interval" in spec else adv_interval
        self.ack_loss_rate = ack_loss_rate
        for fault in self.faults:
            name, _, value = fault.partition(":")
            if name == "ack_loss":
                self.ack_loss_rate = float(value) if value else 1.0
            elif name not in ({"silent", "drop_on_commit"} | SECURITY_FAULTS) or value:
                raise ValueError(f"{self.id}: unknown fault `{fault}`")
        if not 0.0 <= self.ack_loss_rate <= 1.0:
            raise ValueError(f"{self.id}: an ack loss rate is a probability from 0 to 1")
        # One generator per device and purpose: a device's ack delays and losses do not depend on what
        # other devices do, so a seed reproduces them.
        self.ack_rng = random.Random(f"{seed}/acks/{self.id}")
        self.state_path = os.path.join(state_dir, f"{self.id}.json")
        self.config = None
        self.state = 0
        self.blob_expected = None
        self.blob = bytearray()
        self.blob_ended = False
        self.blob_dropped = 0
        self.commits = 0
        self.connections = 0
        self.disconnections = 0
        self.connected = False
        self.fff1_writes = []
        self.acks_sent = []
        self.acks_lost = []
        self.drops = 0
        self.mtu = 23
        # What the device's link got (as its own controller reports it), and its parameter requests.
        self.link = {}
        self.param_request = parse_param_request(spec["param_request"]) if "param_request" in spec else param_request
        self.param_requests = []
        self._init_security(spec)
        self.controller = PacedController(f"ctl-{self.id}", link=link, seed=seed)
        # Devices are powered on at different moments: the first advertising event at a random phase.
        self.controller.le_legacy_advertiser.first_delay = self.controller.rng.uniform(0, self.adv_interval)
        self.ext_adv = spec.get("ext_adv", ext_adv)
        if self.ext_adv is not None:
            if self.ext_adv not in EXT_ADV_PHYS:
                raise ValueError(f"{self.id}: ext_adv is one of {', '.join(EXT_ADV_PHYS)}, not `{self.ext_adv}`")
            self.controller.le_legacy_advertiser.extended_phy = EXT_ADV_PHYS[self.ext_adv]
        self.device = Device.with_hci(self.name, hci.Address(self.address), self.controller, self.controller)
        # docs/devices/sensor-v2.md: the device accepts an ATT MTU of up to 247.
        self.device.gatt_server.max_mtu = 247
        self._build_gatt()
        self._install_pairing()

    def uuid(self, short):
        """A 16-bit UUID as this device declares it: as is, or in 128-bit form (quirk uuid128)."""
        return UUID(BASE_UUID.format(short)) if "uuid128" in self.quirks else UUID(short)

    def _build_gatt(self):
        P = Characteristic.Properties
        R = Characteristic.READABLE
        W = Characteristic.WRITEABLE
        # FFF1 and FFF4 need an encrypted link on a secured device (ATT Insufficient Encryption).
        WS = W | Characteristic.WRITE_REQUIRES_ENCRYPTION if self.security != "none" else W
        u = self.uuid
        self.fff3 = Characteristic(u("FFF3"), P.NOTIFY, R, b"")
        self.battery_char = Characteristic(u("2A19"), P.READ | P.NOTIFY, R, bytes([self.battery]))
        self.device.add_services([
            Service(u("180A"), [
                Characteristic(u("2A29"), P.READ, R, b"Acme"),
                Characteristic(u("2A24"), P.READ, R, b"sensor-v2"),
                Characteristic(u("2A25"), P.READ, R, self.id.encode()),
                Characteristic(u("2A26"), P.READ, R, self.firmware.encode()),
            ]),
            Service(u("180F"), [self.battery_char]),
            Service(u("FFF0"), [
                Characteristic(u("FFF1"), P.WRITE, WS, CharacteristicValue(write=self._on_control)),
                Characteristic(u("FFF2"), P.READ, R, CharacteristicValue(read=lambda _c: bytes([self.state]))),
                self.fff3,
                Characteristic(u("FFF4"), P.WRITE_WITHOUT_RESPONSE, WS, CharacteristicValue(write=self._on_blob)),
            ]),
        ])

    def advertising_data(self):
        name = self.name.encode()
        return bytes([2, 0x01, 0x06, len(name) + 1, 0x09]) + name + bytes([3, 0x02, 0xF0, 0xFF])

    async def start(self):
        await self.device.power_on()
        self.device.on("connection", self._on_connection)
        if "silent" not in self.faults:
            interval_ms = self.adv_interval * 1000
            await self.device.start_advertising(
                advertising_data=self.advertising_data(), auto_restart=True,
                advertising_interval_min=interval_ms, advertising_interval_max=interval_ms)
        self.save()

    def _on_connection(self, connection):
        self.connections += 1
        self.connected = True
        connection.on("disconnection", lambda reason: self._on_disconnection(reason))
        connection.on("connection_att_mtu_update", lambda: self._on_mtu(connection))
        connection.on("connection_parameters_update", lambda: self._on_link(connection))
        connection.on("connection_phy_update", lambda phy: self._on_link(connection, phy))
        connection.on("connection_data_length_change", lambda: self._on_link(connection))
        self._on_link(connection)
        self._watch_security(connection)
        if self.param_request is not None:
            asyncio.get_running_loop().create_task(self._request_parameters(connection))
        self.save()

    def _on_link(self, connection, phy=None):
        p = connection.parameters
        self.link["interval_ms"] = round(p.connection_interval, 3)
        self.link["latency"] = p.peripheral_latency
        length = getattr(connection, "data_length", None)
        if length is not None:
            self.link["tx_octets"], self.link["rx_octets"] = length.max_tx_octets, length.max_rx_octets
        if phy is not None:
            self.link["tx_phy"], self.link["rx_phy"] = int(phy.tx_phy), int(phy.rx_phy)
        self.save()

    async def _request_parameters(self, connection):
        low, high, via = self.param_request
        await asyncio.sleep(0.1)
        entry = {"via": via, "interval_ms": [low, high]}
        updated = asyncio.get_running_loop().create_future()
        connection.on("connection_parameters_update", lambda: updated.done() or updated.set_result(True))
        try:
            await connection.update_parameters(low, high, 0, 4000, use_l2cap=(via == "l2cap"))
            entry["result"] = "accepted"
            # Over L2CAP the answer comes first; the central's LE Connection Update follows on the link.
            await asyncio.wait_for(updated, 2.0)
        except Exception as error:  # refused, or the link went away
            entry.setdefault("result", f"refused: {error!r}")
        entry["interval_after_ms"] = round(connection.parameters.connection_interval, 3)
        self.param_requests.append(entry)
        self.save()

    def _on_mtu(self, connection):
        self.mtu = connection.att_mtu
        self.save()

    def _on_disconnection(self, reason):
        self.link_mitm.clear()
        self.connected = False
        self.disconnections += 1
        self.last_disconnect_reason = reason
        self.save()

    def _on_blob(self, connection, value):
        self._check_security(connection)
        self.fff4_chunks_encrypted.append(encrypted(connection))
        # Bytes that arrive with no blob open (never begun, or already ended) are dropped.
        if self.blob_expected is not None and not self.blob_ended:
            self.blob.extend(value)
        else:
            self.blob_dropped += len(value)
        self.save()

    def _on_control(self, connection, value):
        self._check_security(connection)
        value = bytes(value)
        self.fff1_writes.append(value.hex())
        self.fff1_writes_encrypted.append(encrypted(connection))
        if value[:1] == b"\x02" and "drop_on_commit" in self.faults:
            self.drops += 1
            self.save()
            asyncio.get_running_loop().create_task(self._drop(connection))
            return
        ack = self._execute(value)
        # Decided here, in command order, so a seed gives every device the same losses.
        lost = self.ack_loss_rate > 0 and self.ack_rng.random() < self.ack_loss_rate
        delay = self.ack_rng.uniform(0.005, 0.050)
        self.save()
        asyncio.get_running_loop().create_task(self._send_ack(connection, ack, delay, lost))

    def _execute(self, value):
        """One command as docs/devices/sensor-v2.md says; only the commit is idempotent."""
        if not value:
            return bytes([0x00, 0xFF])
        command = value[0]
        if command == 0x01:
            # A repeated 01 replaces the configuration.
            config = value[1:]
            if not 1 <= len(config) <= 200:
                return b"\x01\x01"
            self.config = config
            self.state = 1
            return b"\x01\x00"
        if command == 0x03:
            # A repeated 03 starts a new blob: the buffer is cleared.
            if len(value) != 5:
                return b"\x03\x01"
            self.blob_expected = int.from_bytes(value[1:5], "little")
            self.blob = bytearray()
            self.blob_ended = False
            return b"\x03\x00"
        if command == 0x04:
            # No blob open (never begun, or already ended), or the wrong length: 04 01. A mismatch
            # leaves the blob open.
            if self.blob_expected is None or self.blob_ended or len(self.blob) != self.blob_expected:
                return b"\x04\x01"
            self.blob_ended = True
            return b"\x04\x00"
        if command == 0x02:
            # Valid after a config was set and a begun blob was ended; idempotent.
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

    async def _send_ack(self, connection, ack, delay, lost):
        # The ack follows the write response by 5-50 ms.
        await asyncio.sleep(delay)
        if lost:
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
            "quirks": self.quirks,
            "config": self.config.hex() if self.config is not None else None,
            "state": self.state,
            "blob_expected": self.blob_expected,
            "blob_bytes": len(self.blob),
            "blob_sha256": hashlib.sha256(bytes(self.blob)).hexdigest(),
            "blob_ended": self.blob_ended,
            "blob_dropped": self.blob_dropped,
            "commits": self.commits,
            "connections": self.connections,
            "disconnections": self.disconnections,
            "connected": self.connected,
            "mtu": self.mtu,
            "link": self.link,
            "param_requests": self.param_requests,
            "fff1_writes": self.fff1_writes,
            "acks_sent": self.acks_sent,
            "acks_lost": self.acks_lost,
            "drops": self.drops,
            "security": self.security,
            "pairings": self.pairings,
            "pairing_failures": self.pairing_failures,
            "encryptions": self.encryptions,
            "bonds_forgotten": self.bonds_forgotten,
            "security_requests_sent": self.security_requests_sent,
            "fff1_writes_encrypted": self.fff1_writes_encrypted,
            "fff4_chunks_encrypted": self.fff4_chunks_encrypted,
        }

    def describe(self):
        """This device in the ready line."""
        return {"id": self.id, "name": self.name, "address": self.address, "state_file": self.state_path,
                "faults": sorted(self.faults), "firmware": self.firmware, "quirks": self.quirks,
                "adv_interval_ms": round(self.adv_interval * 1000, 3), "ack_loss_rate": self.ack_loss_rate,
                "security": self.security, "passkey": self.passkey, "ext_adv": self.ext_adv}

    # -- Security (see SECURITY in the module docstring) --

    def _init_security(self, spec):
        self.security = spec.get("security", "none")
        if self.security not in SECURITY_LEVELS:
            raise ValueError(f"{self.id}: security is one of {', '.join(SECURITY_LEVELS)}, not `{self.security}`")
        self.passkey = str(spec.get("passkey", "")) or None
        if self.passkey is not None and not (self.passkey.isdigit() and len(self.passkey) == 6):
            raise ValueError(f"{self.id}: a passkey is six digits, not `{self.passkey}`")
        self.security_request = bool(spec.get("security_request", False))
        self.pairings = []
        self.pairing_failures = []
        self.encryptions = 0
        self.bonds_forgotten = 0
        self.bond_forgotten = asyncio.Event()  # set each time forget_bond has dropped a bond
        self.security_requests_sent = 0
        self.fff1_writes_encrypted = []
        self.fff4_chunks_encrypted = []
        # Per link: whether its key came from pairing with MITM protection. Per peer: the bond's.
        self.link_mitm = {}
        self.bond_mitm = {}

    def _install_pairing(self):
        if self.security == "none":
            return
        device = self

        class Delegate(PairingDelegate):
            async def generate_passkey(self):
                shown = int(device.passkey or "0")
                if "wrong_passkey" in device.faults:
                    shown = (shown + 1) % 1_000_000
                return shown

        authenticated = self.security == "authenticated"
        io = PairingDelegate.DISPLAY_OUTPUT_ONLY if authenticated else PairingDelegate.NO_OUTPUT_NO_INPUT
        self.device.pairing_config_factory = lambda _connection: PairingConfig(
            sc=True, mitm=authenticated, bonding=True, delegate=Delegate(io_capability=io))

    def _watch_security(self, connection):
        if self.security == "none":
            return
        connection.on("pairing", lambda keys: self._on_pairing(connection, keys))
        connection.on("pairing_failure", lambda reason: self._on_pairing_failure(reason))
        connection.on("connection_encryption_change", lambda: self._on_encryption(connection))
        if self.security_request:
            self.security_requests_sent += 1
            connection.request_pairing()

    def _on_pairing(self, connection, keys):
        mitm = bool(keys.ltk and keys.ltk.authenticated)
        self.link_mitm[connection.handle] = mitm
        self.bond_mitm[str(connection.peer_address)] = mitm
        self.pairings.append({"peer": str(connection.peer_address), "method": "passkey_entry" if mitm else "just_works",
                              "mitm": mitm, "sc": bool(getattr(connection, "sc", False)), "bonded": keys.ltk is not None})
        if "forget_bond" in self.faults:
            asyncio.get_running_loop().create_task(self._forget(str(connection.peer_address)))
        self.save()

    async def _forget(self, peer):
        await self.device.keystore.delete(peer)
        self.bond_mitm.pop(peer, None)
        self.bonds_forgotten += 1
        self.bond_forgotten.set()
        self.save()

    def _on_pairing_failure(self, reason):
        self.pairing_failures.append(getattr(reason, "name", str(reason)))
        self.save()

    def _on_encryption(self, connection):
        if connection.encryption:
            self.encryptions += 1
            # Encrypted with a stored bond: the link is as protected as the bond.
            self.link_mitm.setdefault(connection.handle, self.bond_mitm.get(str(connection.peer_address), False))
        self.save()

    def _check_security(self, connection):
        if self.security == "authenticated" and encrypted(connection) and not self.link_mitm.get(connection.handle, False):
            raise ATT_Error(ErrorCode.INSUFFICIENT_AUTHENTICATION)

    def save(self):
        write_json_atomically(self.state_path, self.snapshot())


def default_devices(count, old_firmware=(), silent=(), ack_loss=(), drop_on_commit=(), security="none",
                    wrong_passkey=(), forget_bond=(), security_request=()):
    devices = []
    for i in range(1, count + 1):
        faults = []
        if i in silent:
            faults.append("silent")
        if i in ack_loss:
            faults.append("ack_loss")
        if i in drop_on_commit:
            faults.append("drop_on_commit")
        if i in wrong_passkey:
            faults.append("wrong_passkey")
        if i in forget_bond:
            faults.append("forget_bond")
        devices.append({
            "security": security,
            "passkey": f"{100000 + i:06d}",
            "security_request": i in security_request,
            "id": f"SN-{i:04d}",
            "name": f"SNS-{i:04d}",
            "address": f"F0:00:00:00:{i >> 8:02X}:{i & 0xFF:02X}",
            "firmware": "1.9.0" if i in old_firmware else "2.4.1",
            "battery": 50 + (i * 7) % 50,
            "faults": faults,
        })
    return devices


def parse_param_request(text):
    """(low ms, high ms, via) from `30ms-50ms@ll`."""
    interval, _, via = text.partition("@")
    if via not in ("l2cap", "ll"):
        raise ValueError(f"`{text}`: say @l2cap or @ll")
    low, high = parse_latency(interval)
    return low * 1000, high * 1000, via


def parse_fault(text):
    """(station index or None, kind, n) from `hardware-error@3` or `2:restart@5`."""
    station, _, rest = text.rpartition(":")
    kind, _, n = rest.partition("@")
    if kind not in ("hardware-error", "restart") or not n.isdigit() or int(n) < 1:
        raise ValueError(f"`{text}` is not [S:]hardware-error@N or [S:]restart@N")
    return (int(station) if station else None), kind, int(n)


def parse_buffers(text):
    """(length, count) from `251x10`."""
    length, _, count = text.lower().partition("x")
    if not (length.isdigit() and count.isdigit() and 27 <= int(length) <= 1021 and 1 <= int(count) <= 255):
        raise ValueError(f"`{text}` is not LENxCOUNT (27-1021 x 1-255)")
    return int(length), int(count)


def parse_indices(text):
    return {int(x) for x in text.split(",") if x.strip()} if text else set()


def argument_parser():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--port", type=int, default=0, help="TCP port for the host (0: pick a free one)")
    parser.add_argument("--host", default="127.0.0.1", help="interface to listen on")
    parser.add_argument("--config", help="JSON file with the devices")
    parser.add_argument("--devices", type=int, default=8, help="number of default devices (without --config)")
    parser.add_argument("--silent", default="", help="indices (1-based) of devices that never advertise")
    parser.add_argument("--ack-loss", default="", help="indices of devices whose acks are lost")
    parser.add_argument("--old-firmware", default="", help="indices of devices running firmware 1.9.0")
    parser.add_argument("--drop-on-commit", default="", help="indices of devices that drop the link on commit")
    parser.add_argument("--security", choices=SECURITY_LEVELS, default="none",
                        help="what every device's FFF1 and FFF4 need: none, encrypted (Just Works) or authenticated (Passkey Entry)")
    parser.add_argument("--wrong-passkey", default="", help="indices of devices that display a passkey other than theirs")
    parser.add_argument("--forget-bond", default="", help="indices of devices that forget every bond once it is made")
    parser.add_argument("--security-request", default="", help="indices of devices that send a Security Request on connect")
    parser.add_argument("--ack-loss-rate", type=float, default=0.0,
                        help="probability that a device loses an ack (every device; seeded)")
    parser.add_argument("--quirk", action="append", default=[], choices=sorted(QUIRKS),
                        help="a quirk of every device (uuid128: SIG UUIDs declared in 128-bit form)")
    parser.add_argument("--adv-interval", type=argument(parse_duration), default=DEFAULT_ADV_INTERVAL,
                        help="advertising interval of every device, e.g. 100ms, 1s (default 20ms; plus 0-10 ms advDelay)")
    parser.add_argument("--link-latency", type=argument(parse_latency), default=(0.0, 0.0),
                        help="delay of every LL PDU each way, e.g. 7.5ms or 7.5ms-25ms (default 0: instant)")
    parser.add_argument("--link-rate", type=argument(lambda t: smp_device.parse_rate(t, "bits")), default=None,
                        help="bandwidth of each direction of every link, e.g. 400kbit/s (default: the PHY's)")
    parser.add_argument("--seed", type=int, default=1, help="seed of every random choice of the fleet")
    parser.add_argument("--stations", type=int, default=1,
                        help="station controllers (one per adapter or per baseline host), on PORT, PORT+1, ... "
                             "(all picked freely with --port 0)")
    parser.add_argument("--fal-size", type=int, default=8, help="Filter Accept List size of station controllers")
    parser.add_argument("--max-links", type=int, default=None, help="links a station controller holds at once")
    parser.add_argument("--max-links-at", choices=["create", "complete"], default="create",
                        help="refuse a link beyond --max-links in LE Create Connection's Command Status (create) "
                             "or in the Connection Complete (complete)")
    parser.add_argument("--no-scan-while-initiating", dest="scan_while_initiating", action="store_false",
                        help="station controllers cannot scan while initiating (LE Read Supported States says so)")
    parser.add_argument("--controller", choices=["bumble", "zephyr"], default="bumble",
                        help="what the station controllers are: bumble (default) or zephyr (BD_ADDR zero, static addresses)")
    parser.add_argument("--no-static-address", action="store_true",
                        help="zephyr stations lack Read Static Addresses (no address of their own at all)")
    parser.add_argument("--acl-buffers", type=argument(parse_buffers), default=None,
                        help="LE ACL buffers of the station controllers, LENxCOUNT (default 27x64; zephyr 251x10)")
    parser.add_argument("--station-fault", type=argument(parse_fault), action="append", default=[],
                        help="[S:]hardware-error@N or [S:]restart@N: after a station's Nth connection (repeatable)")
    parser.add_argument("--pace-by-interval", action="store_true",
                        help="LL PDUs wait for their link's connection events (the interval the host asked for)")
    parser.add_argument("--ext-adv", choices=sorted(EXT_ADV_PHYS), default=None,
                        help="every device advertises only with extended PDUs, its data on this secondary PHY")
    parser.add_argument("--extended", action="store_true",
                        help="station controllers have extended advertising (extended scanning and connecting)")
    parser.add_argument("--param-request", type=argument(parse_param_request), default=None,
                        help="every device asks for other connection parameters after connecting: MIN-MAX@l2cap or @ll")
    parser.add_argument("--state-dir", required=True, help="directory for the per-device state files")
    parser.add_argument("--exit-on-stdin-eof", action="store_true",
                        help="stop when stdin closes (the launching test process died)")
    parser.add_argument("--log-level", default="WARNING")
    smp_device.add_arguments(parser)
    esp_device.add_arguments(parser)
    return parser


async def main():
    parser = argument_parser()
    args = parser.parse_args()
    logging.basicConfig(level=args.log_level, stream=sys.stderr,
                        format="%(asctime)s.%(msecs)03d %(name)s %(message)s", datefmt="%H:%M:%S")
    if not 0.0 <= args.ack_loss_rate <= 1.0:
        parser.error("--ack-loss-rate is a probability from 0 to 1")
    if args.max_links is not None and args.max_links < 1:
        parser.error("--max-links must be at least 1")
    if args.fal_size < 1:
        parser.error("--fal-size must be at least 1")

    if args.config:
        with open(args.config) as f:
            devices = json.load(f)["devices"]
    else:
        devices = default_devices(args.devices, parse_indices(args.old_firmware),
                                  parse_indices(args.silent), parse_indices(args.ack_loss),
                                  parse_indices(args.drop_on_commit), security=args.security,
                                  wrong_passkey=parse_indices(args.wrong_passkey),
                                  forget_bond=parse_indices(args.forget_bond),
                                  security_request=parse_indices(args.security_request))
    os.makedirs(args.state_dir, exist_ok=True)

    link = PacedLink(LinkTiming(args.link_latency, seed=args.seed, rate=args.link_rate,
                                by_interval=args.pace_by_interval))
    try:
        sensors = [SensorV2(spec, link, args.state_dir, seed=args.seed, adv_interval=args.adv_interval,
                            quirks=args.quirk, ack_loss_rate=args.ack_loss_rate, param_request=args.param_request,
                            ext_adv=args.ext_adv)
                   for spec in devices]
        sensors += smp_device.create(args, link, args.state_dir, args.seed, args.adv_interval)
        sensors += esp_device.create(args, link, args.state_dir, args.seed, args.adv_interval)
    except ValueError as error:
        parser.error(str(error))
    for sensor in sensors:
        await sensor.start()

    identities = []

    async def station(index, name, port, public_address):
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        # Accepted sockets inherit it: without it Nagle holds a reply behind the Number Of Completed
        # Packets event sent just before it, for a delayed ACK (~40 ms per ATT round trip).
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.bind((args.host, port))
        sock.listen()
        transport = await open_tcp_server_transport_with_socket(sock)
        faults = [(kind, n) for (s, kind, n) in args.station_fault if s is None or s == index]
        common = dict(host_source=transport.source, host_sink=transport.sink, link=link, seed=args.seed,
                      fal_size=args.fal_size, max_links=args.max_links, max_links_at=args.max_links_at,
                      scan_while_initiating=args.scan_while_initiating, faults=faults, extended=args.extended)
        if args.controller == "zephyr":
            static = f"C4:5A:00:00:00:{index:02X}"
            controller = ZephyrStationController(name, static_address=static, static_addresses=not args.no_static_address,
                                                 acl_buffers=args.acl_buffers or (251, 10), **common)
            identities.append(None if args.no_static_address else static)
        else:
            controller = StationController(name, public_address=public_address, acl_buffers=args.acl_buffers, **common)
            identities.append(None)

        def close_host():
            # The restarting controller drops its host; the server takes the next connection.
            if transport.sink.transport is not None:
                transport.sink.transport.close()
                transport.sink.transport = None
        controller.close_host = close_host
        return transport, sock.getsockname()[1]

    transports = []
    ports = []
    for i in range(max(1, args.stations)):
        transport, port = await station(i + 1, f"station{i + 1}", args.port + i if args.port else 0,
                                        f"00:AA:00:00:00:{i + 1:02X}")
        transports.append(transport)
        ports.append(port)

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    # A launcher may start us with these blocked (Foundation's Process on Linux passes its blocked
    # mask on): SIGTERM would then wait forever, and the launcher falls back to SIGKILL.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM, signal.SIGINT})
    if args.exit_on_stdin_eof:
        def on_stdin():
            if not os.read(sys.stdin.fileno(), 4096):
                loop.remove_reader(sys.stdin.fileno())
                stop.set()
        loop.add_reader(sys.stdin.fileno(), on_stdin)

    low, high = args.link_latency
    print(json.dumps({
        "event": "ready",
        "port": ports[0],
        "ports": ports,
        "devices": [s.describe() for s in sensors if isinstance(s, SensorV2)],
        "smp_devices": [s.describe() for s in sensors if isinstance(s, smp_device.SMPDevice)],
        "esp_devices": [s.describe() for s in sensors if isinstance(s, esp_device.ESPDevice)],
        "radio": {"adv_interval_ms": round(args.adv_interval * 1000, 3),
                  "link_latency_ms": [round(low * 1000, 3), round(high * 1000, 3)], "seed": args.seed,
                  "link_rate_bps": args.link_rate},
        "stations": {"fal_size": args.fal_size, "max_links": args.max_links, "max_links_at": args.max_links_at,
                     "scan_while_initiating": args.scan_while_initiating, "controller": args.controller,
                     "extended": args.extended,
                     "static_addresses": identities},
    }), flush=True)

    await stop.wait()
    for sensor in sensors:
        sensor.save()
    for t in transports:
        await t.close()


if __name__ == "__main__":
    asyncio.run(main())
