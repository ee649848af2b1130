"""A Zephyr-like MCUmgr peripheral with an MCUboot bootloader, on the Bumble fleet's paced radio.

Written from Zephyr's "SMP Protocol Specification" and its OS (0), image (1), settings (3) and file (8)
group documents, Zephyr's Bluetooth SMP transport, and MCUboot's image format and swap design notes.
The fleet launcher starts these devices beside its sensor-v2 devices (bumble_fleet.py --smp-devices N):

    bumble_fleet.py --devices 0 --smp-devices 4 --link-latency 7.5ms --link-rate 400kbit/s --state-dir /tmp/f
    bumble_fleet.py --devices 0 --smp-config dfu.json --state-dir /tmp/f

GATT: service 8D53DC1D-1DB7-4CD3-868B-8A527460AA84, characteristic DA2E7828-FBCE-4E01-AE9E-261174997C48
(write without response, notify). Requests arrive as writes; each response goes back as notifications of
at most ATT_MTU - 3 bytes, only to a central that enabled them (CCCD), as Zephyr does.

SMP (what a device here does, like Zephyr's MCUmgr):
- The 8-byte header (op, version, flags, length, group, sequence, command; big endian). A version-2
  request (Ver 0b01) is answered in version 2: group errors as {"err": {"group", "rc"}}; a version-1 one
  with {"rc"} (group errors translated to the legacy codes). SMP-level errors (unknown group or
  command, bad CBOR) are {"rc"} in both. Ver 0b10/0b11 gets rc 13 (unsupported, too new). `smp_v2`
  false: a device from before version 2, answering everything in version 1. The response echoes the
  request's sequence number, group and command, with op + 1. One request per packet.
- Buffers (CONFIG_MCUMGR_TRANSPORT_NETBUF_COUNT/SIZE): `buf_count` buffers of `buf_size` bytes shared by
  requests and responses. A request takes one when it arrives (its first fragment, with reassembly);
  when none is free it is dropped, silently (a write without response has no error). One worker serves
  the queue in order: it first takes a buffer for the response; when none is free the request is dropped
  unanswered (not executed). Both are freed once the response's notifications have gone over the air
  (Zephyr waits for each notification's sent callback). So a central with n requests in flight on a
  device with n buffers loses some: the safe window is smaller than buf_count.
- Reassembly (CONFIG_MCUMGR_TRANSPORT_BT_REASSEMBLY, `reassembly`): a request may span writes; the header
  of the first says how long it is. A request longer than `buf_size` is dropped. Without reassembly
  every write is a request of its own: a write longer than `buf_size` is dropped, a request whose body is
  shorter than its header says is answered rc 9 (corrupt), and the writes that follow it are read as
  requests of their own.
- MCUmgr parameters (OS command 6, `params`): {"buf_size", "buf_count"}. Without it: rc 8 (not supported).

Groups:
- OS (0): echo (0), reset (5: answered, then the device drops its link after `reset_delay`, stays off for
  `boot_time` and boots: see MCUBOOT), MCUmgr parameters (6), bootloader info (8).
- Image (1): state read/write (0: test = {"hash", "confirm": false}; confirm = {"confirm": true} for the
  running image or with the hash of slot 1 to make it permanent), upload (1), erase (5).
  Upload: the first request (off 0) carries len, optional sha (SHA-256 of the whole file), image,
  upgrade. A first request whose sha and len match the upload in progress is answered with the offset
  the device has (it resumes; nothing is written). A request at another offset than the device's is
  answered with the device's offset (nothing written); one with no upload in progress (after a reboot)
  with off 0. The last answer carries "match" (the data's SHA-256 against sha) when sha was given. The
  first chunk must start with an MCUboot header; `upgrade: true` refuses a version not newer than the
  running one (x.y.z), and so does a device with `downgrade_prevention` for every upload. An upload is
  refused while slot 1 is pending, or while the running image is unconfirmed (slot 1 holds what a revert
  needs). A new upload first erases slot 1 (`erase_time`); every chunk is written at `flash_rate`.
  After the upload completes, the state answers {"off": len} to a first request with the same sha.
- Settings (3): read/write (0), delete (1), commit (2), load/save (3). Values are bytes; what is not saved
  is lost at reset.
- File (8): upload/download (0; off 0 truncates, an upload at another offset than the file's length is
  answered with that length), status (1), hash/checksum (2: sha256 or crc32), supported types (3),
  close (4). `file_hash` false: hash and types answer rc 8.

MCUBOOT (swap mode): slot 0 runs, slot 1 receives uploads. At boot: slot 1 pending for test → swapped
into slot 0, which runs unconfirmed (slot 1 keeps the old image); pending permanent → swapped and
confirmed; slot 0 unconfirmed and nothing pending → reverted (the old image comes back confirmed and the
other goes to slot 1, no longer pending). A slot 1 image whose SHA-256 TLV does not match is not
swapped: MCUboot erases slot 1 and boots the old image. Image state lists slot 0 (active) and slot 1
when it holds a whole, readable image; the flags bootable (always), pending, confirmed, active and
permanent only when true.

FAULTS (per device, "faults" in the config, or --smp-fault INDEX:FAULT):
- drop_mid_upload[:F]: once, when an upload has written more than F (default 0.5) of its length, the
  device drops the link (reason 0x08, as a lost link) instead of answering that chunk. The upload stays
  in RAM: the central resumes from the device's offset.
- failed_swap: every swap fails (slot 1 is erased, the old image boots).
- revert: a test image crashes on its first boot; the watchdog resets and MCUboot reverts (boot takes
  twice as long).
- lose_responses[:P]: each response is lost with probability P (default 0.1; seeded per device).
- buffer_overflow[:N]: the device reports `buf_count` buffers but has N (default buf_count - 2, at least
  1): a central that trusts the report overflows it.
- not_bootable: uploaded images are reported not bootable (as with IMAGE_F_NON_BOOTABLE), and marking
  one for test or confirm is refused.
- silent: never advertises.

STATE: STATE_DIR/<id>.json, written atomically: the running image (version, hash, confirmed), the slots,
the upload in RAM, counters (uploads started and completed, upload bytes received and written, resets,
boots, swaps, reverts, swap failures, tests, confirms), drops by cause, the buffer pool's peak, the
settings (RAM and saved) and files (length and SHA-256). It is written before each response leaves,
except during an upload, whose progress is written at most every 500 ms and whenever it starts, ends or
the link drops.

Config file: {"smp_devices": [{"id": "DFU-0001", "name": "DFU-0001", "address": "F1:00:00:00:00:01",
"version": "1.0.0", "image": "factory.bin", "buf_size": 2475, "buf_count": 4, "reassembly": true,
"params": true, "smp_v2": true, "mtu": 498, "flash_rate": "100KB/s", "erase_time": "0ms",
"boot_time": "1s", "reset_delay": "250ms", "downgrade_prevention": false, "file_hash": true,
"settings": {"app/interval": "3c000000"}, "faults": ["drop_mid_upload:0.4"]}]}.
Every key but id is optional; the defaults come from the --smp-* options.
"""

import asyncio
import dataclasses
import hashlib
import json
import logging
import os
import random
import re
import struct
import zlib

import cbor2
from bumble import hci
from bumble.core import UUID
from bumble.device import Device
from bumble.gatt import Characteristic, CharacteristicValue, Service

import bumble_fleet  # a module import: bumble_fleet imports this module too
import mcuboot_image
from fleet_radio import PacedController, PacedLink, QuietHost

logger = logging.getLogger("bumble_fleet.smp")

SMP_SERVICE = "8D53DC1D-1DB7-4CD3-868B-8A527460AA84"
SMP_CHARACTERISTIC = "DA2E7828-FBCE-4E01-AE9E-261174997C48"

# Header (SMP Protocol Specification, "Frame: the envelope").
HEADER = struct.Struct(">BBHHBB")
HEADER_SIZE = HEADER.size
OP_READ, OP_READ_RSP, OP_WRITE, OP_WRITE_RSP = 0, 1, 2, 3
VERSION_1, VERSION_2 = 0, 1

# Groups and commands.
GROUP_OS, GROUP_IMAGE, GROUP_SETTINGS, GROUP_FILE = 0, 1, 3, 8
OS_ECHO, OS_RESET, OS_PARAMS, OS_BOOTLOADER_INFO = 0, 5, 6, 8
IMG_STATE, IMG_UPLOAD, IMG_ERASE = 0, 1, 5
SETTINGS_VALUE, SETTINGS_DELETE, SETTINGS_COMMIT, SETTINGS_LOAD_SAVE = 0, 1, 2, 3
FS_FILE, FS_STATUS, FS_HASH, FS_HASH_TYPES, FS_CLOSE = 0, 1, 2, 3, 4

# mcumgr_err_t (SMP-level, and version 1's rc).
EOK, EUNKNOWN, ENOMEM, EINVAL, ETIMEOUT, ENOENT, EBADSTATE, EMSGSIZE, ENOTSUP, ECORRUPT = range(10)
UNSUPPORTED_TOO_NEW = 13

# Image group errors (version 2), and the legacy rc a version-1 request gets for each.
IMG_UNKNOWN, IMG_NO_FREE_SLOT, IMG_INVALID_SLOT, IMG_INVALID_OFFSET, IMG_INVALID_LENGTH = 1, 9, 14, 20, 21
IMG_INVALID_HEADER, IMG_INVALID_HEADER_MAGIC, IMG_HASH_NOT_FOUND = 22, 23, 8
IMG_CURRENT_VERSION_IS_NEWER, IMG_ALREADY_PENDING, IMG_TOO_LARGE, IMG_DATA_OVERRUN = 27, 28, 30, 31
IMG_TEST_TO_ACTIVE_DENIED = 33
IMG_LEGACY = {IMG_UNKNOWN: EUNKNOWN, IMG_NO_FREE_SLOT: ENOMEM, IMG_INVALID_SLOT: EINVAL,
              IMG_INVALID_OFFSET: EINVAL, IMG_INVALID_LENGTH: EINVAL, IMG_INVALID_HEADER: EINVAL,
              IMG_INVALID_HEADER_MAGIC: EINVAL, IMG_HASH_NOT_FOUND: EINVAL,
              IMG_CURRENT_VERSION_IS_NEWER: EBADSTATE, IMG_ALREADY_PENDING: EBADSTATE, IMG_TOO_LARGE: EINVAL,
              IMG_DATA_OVERRUN: EINVAL, IMG_TEST_TO_ACTIVE_DENIED: EBADSTATE}
# Settings group errors (version 2).
SETTINGS_KEY_NOT_FOUND = 3
# File group errors (version 2).
FS_FILE_NOT_FOUND, FS_OFFSET_NOT_VALID = 3, 11

FAULTS = {"drop_mid_upload", "failed_swap", "revert", "lose_responses", "buffer_overflow", "not_bootable",
          "silent"}
LINK_LOST = hci.HCI_ErrorCode.CONNECTION_TIMEOUT_ERROR
PROGRESS_SAVE_INTERVAL = 0.500
FILE_CHUNK = 512


def parse_rate(text, unit):
    """A rate in `unit` per second from e.g. `100KB/s`, `400kbit/s`, `2Mbit/s`, `256KiB/s` (B is a byte,
    bit a bit; k/K 1000, Ki 1024, M 10^6). `unit` is "bytes" or "bits"."""
    match = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]*)?)\s*(k|K|Ki|M|Mi)?(B|bit)/s\s*", str(text))
    if not match:
        raise ValueError(f"`{text}` is not a rate: write e.g. 100KB/s or 400kbit/s")
    scale = {None: 1, "k": 1e3, "K": 1e3, "Ki": 1024, "M": 1e6, "Mi": 1024 * 1024}[match.group(2)]
    value = float(match.group(1)) * scale
    value = value * 8 if match.group(3) == "B" else value
    if value <= 0:
        raise ValueError(f"`{text}`: a rate is more than 0")
    return value if unit == "bits" else value / 8


@dataclasses.dataclass
class Header:
    """An SMP header: | Res 3 bits | Ver 2 bits | OP 3 bits | Flags 8 | Length 16 | Group 16 | Seq 8 | Id 8 |."""

    op: int
    version: int
    flags: int
    length: int
    group: int
    seq: int
    command: int

    @classmethod
    def parse(cls, data):
        if len(data) < HEADER_SIZE:
            raise ValueError(f"an SMP header is {HEADER_SIZE} bytes; got {len(data)}")
        first, flags, length, group, seq, command = HEADER.unpack_from(bytes(data[:HEADER_SIZE]))
        return cls(op=first & 0x07, version=(first >> 3) & 0x03, flags=flags, length=length, group=group,
                   seq=seq, command=command)

    def encode(self):
        return HEADER.pack(((self.version & 0x03) << 3) | (self.op & 0x07), self.flags, self.length, self.group,
                           self.seq, self.command)


class BufferPool:
    """`count` buffers shared by requests and responses (`reported` is what MCUmgr parameters say)."""

    def __init__(self, count, reported):
        self.count = count
        self.reported = reported
        self.in_use = 0
        self.peak = 0

    def take(self):
        if self.in_use >= self.count:
            return False
        self.in_use += 1
        self.peak = max(self.peak, self.in_use)
        return True

    def give(self):
        self.in_use = max(0, self.in_use - 1)


class SMPError(Exception):
    """A request answered with an error: `group` None for SMP-level rc, else a group error."""

    def __init__(self, rc, group=None):
        super().__init__(f"rc {rc}" if group is None else f"group {group} rc {rc}")
        self.rc = rc
        self.group = group


@dataclasses.dataclass
class Image:
    data: bytes
    info: mcuboot_image.ImageInfo


class Bootloader:
    """MCUboot's two slots in swap mode (see MCUBOOT in the module docstring); no clock, no radio."""

    def __init__(self, primary, slot_size):
        self.primary = primary  # Image
        self.primary_confirmed = True
        self.secondary = None  # bytes of a whole image, or None
        self.secondary_info = None  # ImageInfo when the secondary is a readable image
        self.pending = None  # None, "test" or "permanent"
        self.slot_size = slot_size

    def erase_secondary(self):
        self.secondary = None
        self.secondary_info = None
        self.pending = None

    def set_secondary(self, data):
        self.secondary = bytes(data)
        try:
            self.secondary_info = mcuboot_image.parse(self.secondary)
        except mcuboot_image.ImageError as error:
            logger.info("slot 1 holds no readable image: %s", error)
            self.secondary_info = None

    def boot(self, failed_swap=False, crashes_on_test=False):
        """What MCUboot does at boot; returns the events, in order (swap, swap_failed, revert)."""
        events = []
        if self.pending is not None:
            info = self.secondary_info
            if info is None or not info.hash_valid or failed_swap:
                self.erase_secondary()
                events.append("swap_failed")
            else:
                permanent = self.pending == "permanent"
                old = self.primary
                self.primary = Image(self.secondary, info)
                self.set_secondary(old.data)
                self.pending = None
                self.primary_confirmed = permanent
                events.append("swap")
                if not crashes_on_test or permanent:
                    return events
                events.append("crash")  # the watchdog resets it before it confirms: MCUboot boots again
        if not self.primary_confirmed and self.secondary_info is not None:
            old = self.primary
            self.primary = Image(self.secondary, self.secondary_info)
            self.set_secondary(old.data)
            self.primary_confirmed = True
            events.append("revert")
        return events

    def states(self, not_bootable=False):
        """Image state entries (group 1 command 0), slot 0 then slot 1."""
        def entry(slot, info, **flags):
            e = {"image": 0, "slot": slot, "version": str(info.version), "hash": info.hash,
                 "bootable": info.bootable and not (not_bootable and slot == 1)}
            e.update({k: True for k, v in flags.items() if v})
            return e
        out = [entry(0, self.primary.info, active=True, confirmed=self.primary_confirmed)]
        if self.secondary_info is not None:
            out.append(entry(1, self.secondary_info, pending=self.pending is not None,
                             permanent=self.pending == "permanent"))
        return out


@dataclasses.dataclass
class Upload:
    """An image upload in the device's RAM."""

    length: int
    sha: bytes
    image: int
    offset: int = 0
    data: bytearray = dataclasses.field(default_factory=bytearray)
    started_at: float = 0.0  # loop time of the first chunk's arrival


def _config(spec, key, default, parse=None):
    value = spec.get(key, default)
    return parse(value) if parse is not None and isinstance(value, str) else value


class SMPDevice:
    """One Zephyr-like MCUmgr peripheral (see the module docstring)."""

    def __init__(self, spec, link, state_dir, seed=1, adv_interval=0.020, defaults=None):
        d = dict(defaults or {})
        d.update(spec)
        self.spec = spec
        self.id = d["id"]
        self.name = d.get("name", self.id)
        self.address = d["address"]
        self.link = link
        self.adv_interval = _config(d, "adv_interval", adv_interval, bumble_fleet.parse_duration)
        self.buf_size = int(d.get("buf_size", 2475))
        self.buf_count = int(d.get("buf_count", 4))
        self.reassembly = bool(d.get("reassembly", True))
        self.params = bool(d.get("params", True))
        self.smp_v2 = bool(d.get("smp_v2", True))
        self.mtu = int(d.get("mtu", 498))
        self.flash_rate = _config(d, "flash_rate", 100_000.0, lambda t: parse_rate(t, "bytes"))
        self.erase_time = _config(d, "erase_time", 0.0, bumble_fleet.parse_duration)
        self.boot_time = _config(d, "boot_time", 1.0, bumble_fleet.parse_duration)
        self.reset_delay = _config(d, "reset_delay", 0.250, bumble_fleet.parse_duration)
        self.slot_size = int(d.get("slot_size", 0x60000))
        self.downgrade_prevention = bool(d.get("downgrade_prevention", False))
        self.file_hash = bool(d.get("file_hash", True))
        if self.buf_size < HEADER_SIZE + 16 or self.buf_count < 1 or not 23 <= self.mtu <= 517:
            raise ValueError(f"{self.id}: buf_size ≥ 24, buf_count ≥ 1 and an ATT MTU of 23-517, please")
        self.faults = {}
        for fault in d.get("faults", []):
            name, _, value = str(fault).partition(":")
            if name not in FAULTS:
                raise ValueError(f"{self.id}: unknown fault `{fault}`; known: {sorted(FAULTS)}")
            self.faults[name] = float(value) if value else None
        actual = self.buf_count
        if "buffer_overflow" in self.faults:
            n = self.faults["buffer_overflow"]
            actual = int(n) if n is not None else max(1, self.buf_count - 2)
        self.pool = BufferPool(actual, self.buf_count)
        self.rng = random.Random(f"{seed}/smp/{self.id}")
        self.state_path = os.path.join(state_dir, f"{self.id}.json")

        factory = self._factory_image(d)
        self.boot = Bootloader(factory, self.slot_size)
        self.boot.primary_confirmed = bool(d.get("confirmed", True))
        self.saved_settings = {k: bytes.fromhex(v) for k, v in d.get("settings", {}).items()}
        self.settings = dict(self.saved_settings)
        self.files = {}
        self.upload = None
        self.counters = {k: 0 for k in (
            "connections", "disconnections", "requests", "responses", "responses_lost", "uploads_started",
            "uploads_resumed", "uploads_completed", "upload_bytes_received", "upload_bytes_written",
            "erases", "resets", "boots", "swaps", "swap_failures", "reverts", "crashes", "tests", "confirms",
            "settings_saves", "echoes", "link_drops", "file_bytes_received", "smp_bytes_received", "bytes_dropped")}
        self.drops = {k: 0 for k in ("no_buffer", "no_response_buffer", "too_long", "malformed")}
        self.history = []
        self.dropped_mid_upload = False
        self.connection = None
        self.connected = False
        self.booting = False
        self.negotiated_mtu = 23
        self.assembling = None  # bytearray of the request being reassembled
        self.queue = asyncio.Queue()
        self.worker = None
        # For the fixture's own tests: a cleared gate holds the worker before it takes an answer's
        # buffer (so a burst's arrival is not a race with it); `writes` counts writes, `wrote` tells.
        self.worker_gate = asyncio.Event()
        self.worker_gate.set()
        self.writes = 0
        self.wrote = asyncio.Event()
        self.generation = 0  # bumped at each reboot: work of an earlier life is dropped
        self._save_pending = None

        self.controller = PacedController(f"ctl-{self.id}", link=link, seed=seed)
        self.controller.le_legacy_advertiser.first_delay = self.controller.rng.uniform(0, self.adv_interval)
        self.device = Device(name=self.name, address=hci.Address(self.address),
                             host=QuietHost(controller_source=self.controller, controller_sink=self.controller))
        self.device.gatt_server.max_mtu = self.mtu
        self.characteristic = Characteristic(
            UUID(SMP_CHARACTERISTIC),
            Characteristic.Properties.WRITE_WITHOUT_RESPONSE | Characteristic.Properties.NOTIFY,
            Characteristic.WRITEABLE, CharacteristicValue(write=self._on_write))
        self.device.add_services([Service(UUID(SMP_SERVICE), [self.characteristic])])

    def _factory_image(self, d):
        if d.get("image"):
            with open(d["image"], "rb") as f:
                data = f.read()
        else:
            body = hashlib.sha256(f"factory/{self.id}".encode()).digest() * 64
            data = mcuboot_image.build(body, d.get("version", "1.0.0"))
        return Image(data, mcuboot_image.parse(data))

    # -- Radio --

    def advertising_data(self):
        uuid = bytes(UUID(SMP_SERVICE))
        name = self.name.encode()[:8]
        return bytes([2, 0x01, 0x06, len(uuid) + 1, 0x07]) + uuid + bytes([len(name) + 1, 0x09]) + name

    async def start(self):
        await self.device.power_on()
        self.device.on("connection", self._on_connection)
        self.worker = asyncio.get_running_loop().create_task(self._serve(self.generation))
        self.counters["boots"] += 1
        await self._advertise()
        self.save()

    async def _advertise(self):
        if "silent" in self.faults:
            return
        interval_ms = self.adv_interval * 1000
        # Advertising comes back after a disconnection by our own hand (_on_disconnection), not Bumble's
        # auto restart: a rebooting device must stay silent.
        await self.device.start_advertising(advertising_data=self.advertising_data(), auto_restart=False,
                                            advertising_interval_min=interval_ms, advertising_interval_max=interval_ms)

    def _on_connection(self, connection):
        self.connection = connection
        self.connected = True
        self.counters["connections"] += 1
        connection.on("disconnection", lambda reason: self._on_disconnection(connection, reason))
        connection.on("connection_att_mtu_update", lambda: self._on_mtu(connection))
        self.save()

    def _on_mtu(self, connection):
        self.negotiated_mtu = connection.att_mtu
        self.save()

    def _on_disconnection(self, connection, reason):
        if self.connection is connection:
            self.connection = None
            self.connected = False
        # Zephyr drops a reassembly in progress when the central goes (its CCC is cleared).
        if self.assembling is not None:
            self.assembling = None
            self.pool.give()
        self.counters["disconnections"] += 1
        self.history.append({"event": "disconnected", "reason": int(reason)})
        self.save()
        if not self.booting:
            asyncio.get_running_loop().create_task(self._advertise())

    # -- Transport: writes in, notifications out --

    def _on_write(self, connection, value):
        value = bytes(value)
        self.writes += 1
        self.wrote.set()
        if self.booting or connection is not self.connection:
            return
        self.counters["smp_bytes_received"] += len(value)
        if not self.reassembly:
            if len(value) > self.buf_size:
                self._drop("too_long", len(value))
            elif not self.pool.take():
                self._drop("no_buffer", len(value))
            else:
                self.queue.put_nowait((connection, value, self.generation))
            return
        if self.assembling is None:
            if len(value) < HEADER_SIZE:
                self._drop("malformed", len(value))
                return
            if HEADER_SIZE + Header.parse(value).length > self.buf_size:
                self._drop("too_long", len(value))
                return
            if not self.pool.take():
                self._drop("no_buffer", len(value))
                return
            self.assembling = bytearray()
        self.assembling += value
        expected = HEADER_SIZE + Header.parse(self.assembling).length
        if len(self.assembling) > expected:
            # More than the header said: Zephyr drops the packet.
            self._drop("malformed", len(self.assembling))
            self.assembling = None
            self.pool.give()
        elif len(self.assembling) == expected:
            packet, self.assembling = bytes(self.assembling), None
            self.queue.put_nowait((connection, packet, self.generation))

    def _drop(self, cause, size):
        self.drops[cause] += 1
        self.counters["bytes_dropped"] += size

    async def _serve(self, generation):
        """The MCUmgr work queue: one request at a time, in arrival order."""
        while True:
            connection, packet, born = await self.queue.get()
            await self.worker_gate.wait()
            if born != generation:
                continue
            # The response buffer comes from the same pool, before the request is looked at.
            if not self.pool.take():
                self._drop("no_response_buffer", len(packet))
                self.pool.give()
                self.save_soon()
                continue
            try:
                response = await self._process(connection, packet)
                if response is not None and generation == self.generation:
                    await self._send(connection, response)
            except Exception:  # a fixture bug must not stop the device; the log says what
                logger.exception("[%s] request %s", self.id, packet[:HEADER_SIZE].hex())
            finally:
                if generation == self.generation:
                    self.pool.give()
                    self.pool.give()

    async def _send(self, connection, response):
        """Notifications of at most MTU - 3 bytes; returns once they have gone over the air."""
        if connection is not self.connection:
            return
        lose = self.faults.get("lose_responses", 0.1) if "lose_responses" in self.faults else 0.0
        if lose and self.rng.random() < lose:
            self.counters["responses_lost"] += 1
            self.save()
            return
        self.counters["responses"] += 1
        chunk = max(20, connection.att_mtu - 3)
        for at in range(0, len(response), chunk):
            if connection is not self.connection:
                return
            await self.device.notify_subscriber(connection, self.characteristic, response[at:at + chunk])
        await self._until_sent(connection)

    async def _until_sent(self, connection):
        if not isinstance(self.link, PacedLink):
            return
        link = self.controller.find_le_connection_by_handle(connection.handle)
        if link is None:
            return
        arrival = self.link.air_free_at(self.controller.random_address, link.peer_address)
        delay = arrival - asyncio.get_running_loop().time()
        if delay > 0:
            await asyncio.sleep(delay)  # the notification's airtime: Zephyr waits for its sent callback

    # -- SMP --

    async def _process(self, connection, packet):
        """The response to one request packet (None: no answer)."""
        self.counters["requests"] += 1
        header = Header.parse(packet)
        body = packet[HEADER_SIZE:HEADER_SIZE + header.length]
        version = header.version if self.smp_v2 else VERSION_1
        if header.op not in (OP_READ, OP_WRITE):
            self._drop("malformed", len(packet))
            return None
        if self.smp_v2 and header.version > VERSION_2:
            return self._response(header, VERSION_2, {"rc": UNSUPPORTED_TOO_NEW})
        if len(body) < header.length:
            return self._response(header, version, {"rc": ECORRUPT})
        try:
            request = cbor2.loads(body) if body else {}
            if not isinstance(request, dict):
                raise SMPError(EINVAL)
            payload = await self._dispatch(connection, header, request)
        except SMPError as error:
            if error.group is None:
                payload = {"rc": error.rc}
            elif version == VERSION_2:
                payload = {"err": {"group": error.group, "rc": error.rc}}
            else:
                payload = {"rc": IMG_LEGACY.get(error.rc, EUNKNOWN) if error.group == GROUP_IMAGE else
                           ENOENT if error.rc in (SETTINGS_KEY_NOT_FOUND, FS_FILE_NOT_FOUND) else EINVAL}
        except (cbor2.CBORDecodeError, ValueError, TypeError):
            payload = {"rc": EINVAL}
        if payload is None:
            return None
        return self._response(header, version, payload)

    @staticmethod
    def _response(header, version, payload):
        body = cbor2.dumps(payload)
        reply = Header(op=header.op + 1, version=version, flags=0, length=len(body), group=header.group,
                       seq=header.seq, command=header.command)
        return reply.encode() + body

    async def _dispatch(self, connection, header, request):
        key = (header.group, header.command, header.op)
        handler = {
            (GROUP_OS, OS_ECHO, OP_WRITE): self._echo,
            (GROUP_OS, OS_RESET, OP_WRITE): self._reset,
            (GROUP_OS, OS_PARAMS, OP_READ): self._parameters,
            (GROUP_OS, OS_BOOTLOADER_INFO, OP_READ): self._bootloader_info,
            (GROUP_IMAGE, IMG_STATE, OP_READ): self._image_state,
            (GROUP_IMAGE, IMG_STATE, OP_WRITE): self._image_state_write,
            (GROUP_IMAGE, IMG_UPLOAD, OP_WRITE): self._image_upload,
            (GROUP_IMAGE, IMG_ERASE, OP_WRITE): self._image_erase,
            (GROUP_SETTINGS, SETTINGS_VALUE, OP_READ): self._setting_read,
            (GROUP_SETTINGS, SETTINGS_VALUE, OP_WRITE): self._setting_write,
            (GROUP_SETTINGS, SETTINGS_DELETE, OP_WRITE): self._setting_delete,
            (GROUP_SETTINGS, SETTINGS_COMMIT, OP_WRITE): self._settings_commit,
            (GROUP_SETTINGS, SETTINGS_LOAD_SAVE, OP_READ): self._settings_load,
            (GROUP_SETTINGS, SETTINGS_LOAD_SAVE, OP_WRITE): self._settings_save,
            (GROUP_FILE, FS_FILE, OP_WRITE): self._file_upload,
            (GROUP_FILE, FS_FILE, OP_READ): self._file_download,
            (GROUP_FILE, FS_STATUS, OP_READ): self._file_status,
            (GROUP_FILE, FS_HASH, OP_READ): self._file_hash,
            (GROUP_FILE, FS_HASH_TYPES, OP_READ): self._file_hash_types,
            (GROUP_FILE, FS_CLOSE, OP_WRITE): self._file_close,
        }.get(key)
        if handler is None:
            raise SMPError(ENOTSUP)
        return await handler(connection, request)

    # OS group

    async def _echo(self, _connection, request):
        text = request.get("d")
        if not isinstance(text, str):
            raise SMPError(EINVAL)
        self.counters["echoes"] += 1
        return {"r": text}

    async def _parameters(self, _connection, _request):
        if not self.params:
            raise SMPError(ENOTSUP)
        return {"buf_size": self.buf_size, "buf_count": self.pool.reported}

    async def _bootloader_info(self, _connection, request):
        if request.get("query") == "mode":
            return {"mode": 3, "no-downgrade": self.downgrade_prevention}
        return {"bootloader": "MCUboot"}

    async def _reset(self, connection, _request):
        self.counters["resets"] += 1
        self.history.append({"event": "reset"})
        asyncio.get_running_loop().create_task(self._reboot(connection))
        return {}

    async def _reboot(self, connection):
        await asyncio.sleep(self.reset_delay)  # CONFIG_MCUMGR_GRP_OS_RESET_MS: the answer leaves first
        self.booting = True
        self.generation += 1
        if self.worker is not None:
            self.worker.cancel()  # what it was doing dies with the CPU
        self.upload = None
        self.assembling = None
        self.settings = dict(self.saved_settings)
        self.pool.in_use = 0
        while not self.queue.empty():
            self.queue.get_nowait()
        if connection is self.connection:
            await self._disconnect(connection, hci.HCI_ErrorCode.REMOTE_USER_TERMINATED_CONNECTION_ERROR)
        self.save()
        await asyncio.sleep(self.boot_time)
        events = self.boot.boot(failed_swap="failed_swap" in self.faults, crashes_on_test="revert" in self.faults)
        if "crash" in events:
            await asyncio.sleep(self.boot_time)  # the watchdog, and a second boot that reverts
        for event in events:
            key = {"swap": "swaps", "swap_failed": "swap_failures", "revert": "reverts", "crash": "crashes"}[event]
            self.counters[key] += 1
            self.history.append({"event": event, "running": str(self.boot.primary.info.version)})
        self.counters["boots"] += 1
        self.booting = False
        self.worker = asyncio.get_running_loop().create_task(self._serve(self.generation))
        await self._advertise()
        self.save()

    async def _disconnect(self, connection, reason):
        try:
            await connection.disconnect(reason)
        except Exception as error:  # the central may have gone first
            logger.debug("[%s] disconnect: %r", self.id, error)

    # Image group

    async def _image_state(self, _connection, _request):
        return {"images": self.boot.states("not_bootable" in self.faults), "splitStatus": 0}

    async def _image_state_write(self, _connection, request):
        confirm = bool(request.get("confirm", False))
        wanted = request.get("hash")
        if wanted is not None and not isinstance(wanted, bytes):
            raise SMPError(EINVAL)
        primary = self.boot.primary.info
        secondary = self.boot.secondary_info
        if wanted is None or wanted == primary.hash:
            if not confirm:
                raise SMPError(IMG_TEST_TO_ACTIVE_DENIED, GROUP_IMAGE)
            self.boot.primary_confirmed = True
            self.counters["confirms"] += 1
            self.history.append({"event": "confirm", "image": str(primary.version)})
        elif secondary is not None and wanted == secondary.hash:
            if "not_bootable" in self.faults or not secondary.bootable:
                raise SMPError(IMG_UNKNOWN, GROUP_IMAGE)
            self.boot.pending = "permanent" if confirm else "test"
            self.counters["confirms" if confirm else "tests"] += 1
            self.history.append({"event": self.boot.pending, "image": str(secondary.version)})
        else:
            raise SMPError(IMG_HASH_NOT_FOUND, GROUP_IMAGE)
        self.save()
        return await self._image_state(None, {})

    async def _image_erase(self, _connection, request):
        slot = request.get("slot", 1)
        if slot != 1:
            raise SMPError(IMG_INVALID_SLOT, GROUP_IMAGE)
        if self.boot.pending is not None:
            raise SMPError(IMG_ALREADY_PENDING, GROUP_IMAGE)
        await asyncio.sleep(self.erase_time)
        self.boot.erase_secondary()
        self.upload = None
        self.counters["erases"] += 1
        self.save()
        return {}

    async def _image_upload(self, connection, request):
        off, data = request.get("off"), request.get("data")
        if not isinstance(off, int) or off < 0 or not isinstance(data, bytes):
            raise SMPError(EINVAL)
        self.counters["upload_bytes_received"] += len(data)
        if off == 0:
            sha, length = request.get("sha"), request.get("len")
            up = self.upload
            if up is not None and sha and up.sha == sha and up.length == length:
                self.counters["uploads_resumed"] += 1
                self.history.append({"event": "upload_resumed", "off": up.offset})
                self.save()
                return {"off": up.offset}
            await self._start_upload(request, data, length, sha)
        elif self.upload is None:
            return {"off": 0}  # nothing in RAM (a reboot): start again
        elif off != self.upload.offset:
            return {"off": self.upload.offset}
        up = self.upload
        if off + len(data) > up.length:
            raise SMPError(IMG_DATA_OVERRUN, GROUP_IMAGE)
        await asyncio.sleep(len(data) / self.flash_rate)
        if up is not self.upload:
            return None  # rebooted or erased meanwhile
        up.data += data
        up.offset += len(data)
        self.counters["upload_bytes_written"] += len(data)
        drop = self.faults.get("drop_mid_upload", 0.5) if "drop_mid_upload" in self.faults else None
        if drop is not None and not self.dropped_mid_upload and up.offset > drop * up.length and up.offset < up.length:
            self.dropped_mid_upload = True
            self.counters["link_drops"] += 1
            self.history.append({"event": "drop_mid_upload", "off": up.offset})
            self.save()
            asyncio.get_running_loop().create_task(self._disconnect(connection, LINK_LOST))
            return None
        answer = {"off": up.offset}
        if up.offset == up.length:
            self.boot.set_secondary(up.data)
            self.counters["uploads_completed"] += 1
            # Device-side duration, from the first chunk's arrival to the last one written (resumes
            # included): what a bench divides the length by, whoever the central was.
            seconds = asyncio.get_running_loop().time() - up.started_at
            self.history.append({"event": "upload_completed", "len": up.length, "seconds": round(seconds, 4),
                                 "at": round(asyncio.get_running_loop().time(), 4)})
            if up.sha:
                answer["match"] = hashlib.sha256(up.data).digest() == up.sha
            self.save()
        else:
            self.save_soon()
        return answer

    async def _start_upload(self, request, data, length, sha):
        image = request.get("image", 0)
        if image != 0:
            raise SMPError(IMG_INVALID_SLOT, GROUP_IMAGE)
        if not isinstance(length, int) or length <= 0:
            raise SMPError(IMG_INVALID_LENGTH, GROUP_IMAGE)
        if length > self.slot_size:
            raise SMPError(IMG_TOO_LARGE, GROUP_IMAGE)
        if sha is not None and not isinstance(sha, bytes):
            raise SMPError(EINVAL)
        if self.boot.pending is not None:
            raise SMPError(IMG_ALREADY_PENDING, GROUP_IMAGE)
        if not self.boot.primary_confirmed:
            raise SMPError(IMG_NO_FREE_SLOT, GROUP_IMAGE)
        try:
            version = mcuboot_image.version_of_first_chunk(data)
        except mcuboot_image.ImageError:
            raise SMPError(IMG_INVALID_HEADER_MAGIC if len(data) >= 4 else IMG_INVALID_HEADER, GROUP_IMAGE) from None
        if (request.get("upgrade") or self.downgrade_prevention) and \
                version.triple() <= self.boot.primary.info.version.triple():
            raise SMPError(IMG_CURRENT_VERSION_IS_NEWER, GROUP_IMAGE)
        await asyncio.sleep(self.erase_time)
        self.boot.erase_secondary()
        self.upload = Upload(length=length, sha=sha or b"", image=image,
                             started_at=asyncio.get_running_loop().time() - self.erase_time)
        self.counters["uploads_started"] += 1
        self.history.append({"event": "upload_started", "len": length, "version": str(version),
                             "at": round(self.upload.started_at, 4)})
        self.save()

    # Settings group

    async def _setting_read(self, _connection, request):
        name = request.get("name")
        if not isinstance(name, str):
            raise SMPError(EINVAL)
        if name not in self.settings:
            raise SMPError(SETTINGS_KEY_NOT_FOUND, GROUP_SETTINGS)
        value = self.settings[name]
        limit = request.get("max_size")
        return {"val": value[:limit] if isinstance(limit, int) and limit >= 0 else value}

    async def _setting_write(self, _connection, request):
        name, value = request.get("name"), request.get("val")
        if not isinstance(name, str) or not isinstance(value, bytes):
            raise SMPError(EINVAL)
        self.settings[name] = value
        self.save()
        return {}

    async def _setting_delete(self, _connection, request):
        name = request.get("name")
        if name not in self.settings:
            raise SMPError(SETTINGS_KEY_NOT_FOUND, GROUP_SETTINGS)
        del self.settings[name]
        self.save()
        return {}

    async def _settings_commit(self, _connection, _request):
        return {}

    async def _settings_load(self, _connection, _request):
        self.settings = dict(self.saved_settings)
        self.save()
        return {}

    async def _settings_save(self, _connection, _request):
        self.saved_settings = dict(self.settings)
        self.counters["settings_saves"] += 1
        self.save()
        return {}

    # File group

    def _file_name(self, request):
        name = request.get("name")
        if not isinstance(name, str) or not name.startswith("/"):
            raise SMPError(EINVAL)
        return name

    async def _file_upload(self, _connection, request):
        name = self._file_name(request)
        off, data = request.get("off"), request.get("data")
        if not isinstance(off, int) or off < 0 or not isinstance(data, bytes):
            raise SMPError(EINVAL)
        self.counters["file_bytes_received"] += len(data)
        if off == 0:
            self.files[name] = bytearray()
        current = self.files.get(name)
        if current is None:
            raise SMPError(FS_FILE_NOT_FOUND, GROUP_FILE)
        if off != len(current):
            return {"off": len(current)}
        await asyncio.sleep(len(data) / self.flash_rate)
        current += data
        self.save_soon()
        return {"off": len(current)}

    async def _file_download(self, _connection, request):
        name = self._file_name(request)
        off = request.get("off", 0)
        if name not in self.files:
            raise SMPError(FS_FILE_NOT_FOUND, GROUP_FILE)
        content = self.files[name]
        if not isinstance(off, int) or off < 0 or off > len(content):
            raise SMPError(FS_OFFSET_NOT_VALID, GROUP_FILE)
        answer = {"off": off, "data": bytes(content[off:off + min(FILE_CHUNK, self.buf_size - 64)])}
        if off == 0:
            answer["len"] = len(content)
        return answer

    async def _file_status(self, _connection, request):
        name = self._file_name(request)
        if name not in self.files:
            raise SMPError(FS_FILE_NOT_FOUND, GROUP_FILE)
        return {"len": len(self.files[name])}

    async def _file_hash(self, _connection, request):
        if not self.file_hash:
            raise SMPError(ENOTSUP)
        name = self._file_name(request)
        if name not in self.files:
            raise SMPError(FS_FILE_NOT_FOUND, GROUP_FILE)
        kind = request.get("type", "crc32")
        off = request.get("off", 0)
        content = bytes(self.files[name])
        if not isinstance(off, int) or off < 0 or off > len(content):
            raise SMPError(FS_OFFSET_NOT_VALID, GROUP_FILE)
        length = request.get("len", len(content) - off)
        part = content[off:off + length] if isinstance(length, int) and length >= 0 else content[off:]
        if kind == "sha256":
            output = hashlib.sha256(part).digest()
        elif kind == "crc32":
            output = zlib.crc32(part)
        else:
            raise SMPError(EINVAL)
        return {"type": kind, "off": off, "len": len(part), "output": output}

    async def _file_hash_types(self, _connection, _request):
        if not self.file_hash:
            raise SMPError(ENOTSUP)
        return {"types": {"crc32": {"format": 0, "size": 4}, "sha256": {"format": 1, "size": 32}}}

    async def _file_close(self, _connection, _request):
        return {}

    # -- State --

    def snapshot(self):
        primary = self.boot.primary.info
        up = self.upload
        return {
            "id": self.id, "name": self.name, "address": self.address, "kind": "smp",
            "connected": self.connected, "booting": self.booting, "mtu": self.negotiated_mtu,
            "running": {"version": str(primary.version), "hash": primary.hash.hex(),
                        "confirmed": self.boot.primary_confirmed},
            "slots": [dict(s, hash=s["hash"].hex()) for s in self.boot.states("not_bootable" in self.faults)],
            "pending": self.boot.pending,
            "upload": None if up is None else {"len": up.length, "off": up.offset, "sha": up.sha.hex()},
            "buffers": {"count": self.pool.count, "reported": self.pool.reported, "size": self.buf_size,
                        "peak_in_use": self.pool.peak},
            "reassembly": self.reassembly, "params": self.params, "smp_v2": self.smp_v2,
            "faults": sorted(self.faults),
            "counters": dict(self.counters),
            "drops": dict(self.drops),
            "settings": {k: v.hex() for k, v in sorted(self.settings.items())},
            "saved_settings": {k: v.hex() for k, v in sorted(self.saved_settings.items())},
            "files": {k: {"len": len(v), "sha256": hashlib.sha256(bytes(v)).hexdigest()}
                      for k, v in sorted(self.files.items())},
            "history": self.history[-200:],
        }

    def describe(self):
        """This device in the fleet's ready line."""
        return {"id": self.id, "name": self.name, "address": self.address, "state_file": self.state_path,
                "version": str(self.boot.primary.info.version), "hash": self.boot.primary.info.hash.hex(),
                "buf_size": self.buf_size, "buf_count": self.buf_count, "reassembly": self.reassembly,
                "params": self.params, "smp_v2": self.smp_v2, "mtu": self.mtu,
                "flash_rate_bytes_per_s": self.flash_rate, "erase_time_ms": round(self.erase_time * 1000, 3),
                "boot_time_ms": round(self.boot_time * 1000, 3), "faults": sorted(self.faults)}

    def save(self):
        if self._save_pending is not None:
            self._save_pending.cancel()
            self._save_pending = None
        bumble_fleet.write_json_atomically(self.state_path, self.snapshot())

    def save_soon(self):
        """Upload progress: written within PROGRESS_SAVE_INTERVAL, not on every chunk (CPU of 16 links)."""
        if self._save_pending is None:
            self._save_pending = asyncio.get_running_loop().call_later(PROGRESS_SAVE_INTERVAL, self._deferred_save)

    def _deferred_save(self):
        self._save_pending = None
        self.save()


# -- The fleet launcher's hook (bumble_fleet.py) --

def add_arguments(parser):
    """The --smp-* options of bumble_fleet.py."""
    group = parser.add_argument_group("SMP devices (smp_device.py: Zephyr-like MCUmgr peripherals with MCUboot)")
    group.add_argument("--smp-devices", type=int, default=0,
                       help="number of default SMP devices DFU-0001... (F1:00:00:00:00:01...)")
    group.add_argument("--smp-config", help="JSON file with {\"smp_devices\": [...]} (see smp_device.py)")
    group.add_argument("--smp-version", default="1.0.0", help="version of every device's factory image")
    group.add_argument("--smp-buf-size", type=int, default=2475, help="MCUmgr buffer size (default 2475)")
    group.add_argument("--smp-buf-count", type=int, default=4, help="MCUmgr buffers (default 4)")
    group.add_argument("--smp-no-reassembly", dest="smp_reassembly", action="store_false",
                       help="a request must fit one write")
    group.add_argument("--smp-no-params", dest="smp_params", action="store_false",
                       help="MCUmgr parameters (OS command 6) answer rc 8")
    group.add_argument("--smp-v1", dest="smp_v2", action="store_false", help="answer every request in SMP version 1")
    group.add_argument("--smp-mtu", type=int, default=498, help="largest ATT MTU the devices accept (default 498)")
    group.add_argument("--smp-flash-rate", default="100KB/s", help="flash write speed (default 100KB/s)")
    duration = bumble_fleet.argument(bumble_fleet.parse_duration)
    group.add_argument("--smp-erase-time", type=duration, default=0.0, help="slot erase time (default 0)")
    group.add_argument("--smp-boot-time", type=duration, default=1.0, help="boot time (default 1s)")
    group.add_argument("--smp-reset-delay", type=duration, default=0.250,
                       help="from a reset's answer to the reboot (default 250ms)")
    group.add_argument("--smp-downgrade-prevention", action="store_true",
                       help="refuse any upload not newer than the running image")
    group.add_argument("--smp-fault", action="append", default=[], metavar="INDEX:FAULT[:ARG]",
                       help="a fault of device INDEX (1-based), e.g. 2:drop_mid_upload:0.4, 3:revert")


def specs_from_args(args):
    """The SMP device specs and the defaults every spec falls back on."""
    defaults = {"version": args.smp_version, "buf_size": args.smp_buf_size, "buf_count": args.smp_buf_count,
                "reassembly": args.smp_reassembly, "params": args.smp_params, "smp_v2": args.smp_v2,
                "mtu": args.smp_mtu, "flash_rate": args.smp_flash_rate, "erase_time": args.smp_erase_time,
                "boot_time": args.smp_boot_time, "reset_delay": args.smp_reset_delay,
                "downgrade_prevention": args.smp_downgrade_prevention}
    if args.smp_config:
        with open(args.smp_config) as f:
            specs = json.load(f).get("smp_devices", [])
    else:
        specs = [{"id": f"DFU-{i:04d}", "name": f"DFU-{i:04d}",
                  "address": f"F1:00:00:00:{i >> 8:02X}:{i & 0xFF:02X}"} for i in range(1, args.smp_devices + 1)]
    for text in args.smp_fault:
        index, _, fault = text.partition(":")
        if not index.isdigit() or not 1 <= int(index) <= len(specs) or not fault:
            raise ValueError(f"--smp-fault `{text}`: write INDEX:FAULT with INDEX from 1 to {len(specs)}")
        specs[int(index) - 1].setdefault("faults", []).append(fault)
    return specs, defaults


def create(args, link, state_dir, seed, adv_interval):
    """The SMP devices the options ask for (ValueError with the reason when they are wrong)."""
    specs, defaults = specs_from_args(args)
    return [SMPDevice(spec, link, state_dir, seed=seed, adv_interval=adv_interval, defaults=defaults)
            for spec in specs]
