"""An ESP32-like unit running Wi-Fi provisioning over BLE, on the Bumble fleet's paced radio.

Written from Espressif's documents and sources as a reader would (ESP-IDF's protocomm component and its
security0/1/2 and BLE transport notes, the wifi_provisioning / network_provisioning manager's .proto
files and docs, tools/esp_prov as the reference client), not from their code. The fleet launcher
starts these units beside its other devices:

    bumble_fleet.py --devices 0 --esp-devices 16 --link-latency 7.5ms --state-dir /tmp/f \\
        --esp-fault 5:wrong_pop --esp-fault 9:no_ap

GATT (protocomm over BLE): one primary service, 021a9004-0382-4aea-bff4-6b3f1c5adfb4 as in ESP-IDF's
examples. Every endpoint is a read/write characteristic whose Characteristic User Description (0x2901)
is its name; its UUID is the service's with bytes 12-13 replaced (0xFF50 prov-scan, 0xFF51 prov-session,
0xFF52 prov-config, 0xFF53 proto-ver, 0xFF54 prov-ctrl, 0xFF55... the custom endpoints). A request is a
write (long writes by Prepare/Execute Write); its response is what the next read of the same
characteristic on that connection returns (long reads by Read Blob). A request the unit's handler
refuses (a wrong proof of possession, a request before the session) gets an ATT Error Response
(Unlikely Error), as ESP-IDF's NimBLE transport answers a failed handler.

Endpoints:
- proto-ver: JSON {"prov": {"ver": "v1.1", "sec_ver": S, "sec_patch_ver": 1, "cap": ["wifi_scan"]}}, in
  the clear, whatever was written.
- prov-session: SessionData (sec_ver 2, oneof sec0 10 / sec1 11 / sec2 12). Security 0: S0SessionCmd →
  S0SessionResp. Security 1: SessionCmd0 (client X25519 key) → SessionResp0 (device key, 16-byte random);
  the shared secret XOR SHA-256(PoP) is the AES-256-CTR key, the random the counter block, one keystream
  for the session in both directions; SessionCmd1 (the device key encrypted) → SessionResp1 (the client
  key encrypted). Security 2: S2SessionCmd0 (username, A) → S2SessionResp0 (B, salt); S2SessionCmd1 (M)
  → S2SessionResp1 (H_AMK, nonce); SRP-6a over RFC 5054's 3072-bit group with SHA-512, k = H(N | PAD(g)),
  u = H(PAD(A) | PAD(B)), x = H(s | H(I ":" p)), K = H(S), M = H(H(N) xor H(PAD(g)) | H(I) | s | A | B | K),
  H_AMK = H(A | M | K); AES-256-GCM with K's first 32 bytes, the nonce's last 4 bytes counting every
  message of the session (sec_patch_ver 1). The unit keeps the salt and verifier, never the PoP.
- prov-config (encrypted): CmdGetStatus / CmdSetConfig (ssid, passphrase) / CmdApplyConfig. The unit
  keeps the SSID and only the SHA-256 of the passphrase. After apply the station connects for
  `join_time`, then is Connected (IP, auth mode, SSID, BSSID, channel) or ConnectionFailed with
  AuthError or NetworkNotFound.
- prov-scan (encrypted): CmdScanStart, CmdScanStatus (finished, count), CmdScanResult (start, count).
- prov-ctrl (encrypted): CmdCtrlReset, CmdCtrlReprov.
- custom-data (encrypted): `wifi?` answers `connected IP` (or the station's state); anything else SUCCESS.

FAULTS (--esp-fault INDEX:FAULT[:ARG]): wrong_pop (the unit holds another PoP than its label's),
no_ap (no access point with the SSID), wrong_passphrase (the access point refuses it), slow_join:T (the
join takes T), drop_on_apply (the first apply is executed and the unit drops the link, reason 0x08).

STATE: STATE_DIR/<id>.json, written atomically: the SSID set, passphrase_sha256, the station state and
IP, counters (connections, sessions, failed_proofs, set_configs, applies, status_requests, scans,
custom_requests, link_drops), the history of events. Never the passphrase, never the PoP.
"""

import asyncio
import hashlib
import json
import logging
import os
import random

from bumble import hci
from bumble.att import ATT_Error, ErrorCode
from bumble.core import UUID
from bumble.device import Device
from bumble.gatt import (GATT_CHARACTERISTIC_USER_DESCRIPTION_DESCRIPTOR, Characteristic, CharacteristicValue,
                         Descriptor, Service)
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

import bumble_fleet  # a module import: bumble_fleet imports this module too
from fleet_radio import PacedController, QuietHost

logger = logging.getLogger("bumble_fleet.esp")

SERVICE = "021a9004-0382-4aea-bff4-6b3f1c5adfb4"
ENDPOINTS = ["prov-scan", "prov-session", "prov-config", "proto-ver", "prov-ctrl"]
FAULTS = {"wrong_pop", "no_ap", "wrong_passphrase", "slow_join", "drop_on_apply", "silent"}
LINK_LOST = hci.HCI_ErrorCode.CONNECTION_TIMEOUT_ERROR


# -- Messages: the .proto files as descriptors (field numbers and types as the files declare them) --

def _schema():
    """A FileDescriptorProto with every message and enum the unit speaks (proto3, package espprov)."""
    f = descriptor_pb2.FileDescriptorProto(name="espprov.proto", package="espprov", syntax="proto3")
    T = descriptor_pb2.FieldDescriptorProto
    kinds = {"bytes": T.TYPE_BYTES, "string": T.TYPE_STRING, "bool": T.TYPE_BOOL, "uint32": T.TYPE_UINT32,
             "int32": T.TYPE_INT32}

    def enum(name, *values):
        e = f.enum_type.add(name=name)
        for i, v in enumerate(values):
            e.value.add(name=f"{name}_{v}", number=i)

    def message(name, *fields, oneof=None):
        m = f.message_type.add(name=name)
        if oneof:
            m.oneof_decl.add(name=oneof)
        for number, field, kind, *rest in fields:
            fd = m.field.add(name=field, number=number, label=T.LABEL_REPEATED if rest == ["repeated"] else T.LABEL_OPTIONAL)
            if kind in kinds:
                fd.type = kinds[kind]
            elif kind.startswith("enum:"):
                fd.type, fd.type_name = T.TYPE_ENUM, ".espprov." + kind[5:]
            else:
                fd.type, fd.type_name = T.TYPE_MESSAGE, ".espprov." + kind
            if rest == ["oneof"]:
                fd.oneof_index = 0

    enum("Status", "Success", "InvalidSecScheme", "InvalidProto", "TooManySessions", "InvalidArgument",
         "InternalError", "CryptoError", "InvalidSession")
    enum("SecSchemeVersion", "0", "1", "2")
    message("S0SessionCmd")
    message("S0SessionResp", (1, "status", "enum:Status"))
    message("Sec0Payload", (1, "msg", "uint32"), (20, "sc", "S0SessionCmd", "oneof"), (21, "sr", "S0SessionResp", "oneof"),
            oneof="payload")
    message("SessionCmd0", (1, "client_pubkey", "bytes"))
    message("SessionResp0", (1, "status", "enum:Status"), (2, "device_pubkey", "bytes"), (3, "device_random", "bytes"))
    message("SessionCmd1", (2, "client_verify_data", "bytes"))
    message("SessionResp1", (1, "status", "enum:Status"), (3, "device_verify_data", "bytes"))
    message("Sec1Payload", (1, "msg", "uint32"), (20, "sc0", "SessionCmd0", "oneof"), (21, "sr0", "SessionResp0", "oneof"),
            (22, "sc1", "SessionCmd1", "oneof"), (23, "sr1", "SessionResp1", "oneof"), oneof="payload")
    message("S2SessionCmd0", (1, "client_username", "bytes"), (2, "client_pubkey", "bytes"))
    message("S2SessionResp0", (1, "status", "enum:Status"), (2, "device_pubkey", "bytes"), (3, "device_salt", "bytes"))
    message("S2SessionCmd1", (1, "client_proof", "bytes"))
    message("S2SessionResp1", (1, "status", "enum:Status"), (2, "device_proof", "bytes"), (3, "device_nonce", "bytes"))
    message("Sec2Payload", (1, "msg", "uint32"), (20, "sc0", "S2SessionCmd0", "oneof"), (21, "sr0", "S2SessionResp0", "oneof"),
            (22, "sc1", "S2SessionCmd1", "oneof"), (23, "sr1", "S2SessionResp1", "oneof"), oneof="payload")
    message("SessionData", (2, "sec_ver", "enum:SecSchemeVersion"), (10, "sec0", "Sec0Payload", "oneof"),
            (11, "sec1", "Sec1Payload", "oneof"), (12, "sec2", "Sec2Payload", "oneof"), oneof="proto")
    # wifi_constants / wifi_config
    message("WifiConnectedState", (1, "ip4_addr", "string"), (2, "auth_mode", "uint32"), (3, "ssid", "bytes"),
            (4, "bssid", "bytes"), (5, "channel", "int32"))
    message("WifiAttemptFailed", (1, "attempts_remaining", "uint32"))
    message("Empty")
    message("RespGetStatus", (1, "status", "enum:Status"), (2, "sta_state", "uint32"), (10, "fail_reason", "uint32", "oneof"),
            (11, "connected", "WifiConnectedState", "oneof"), (12, "attempt_failed", "WifiAttemptFailed", "oneof"), oneof="state")
    message("CmdSetConfig", (1, "ssid", "bytes"), (2, "passphrase", "bytes"), (3, "bssid", "bytes"), (4, "channel", "int32"))
    message("RespStatus", (1, "status", "enum:Status"))
    message("WiFiConfigPayload", (1, "msg", "uint32"), (10, "cmd_get_status", "Empty", "oneof"),
            (11, "resp_get_status", "RespGetStatus", "oneof"), (12, "cmd_set_config", "CmdSetConfig", "oneof"),
            (13, "resp_set_config", "RespStatus", "oneof"), (14, "cmd_apply_config", "Empty", "oneof"),
            (15, "resp_apply_config", "RespStatus", "oneof"), oneof="payload")
    # wifi_scan
    message("CmdScanStart", (1, "blocking", "bool"), (2, "passive", "bool"), (3, "group_channels", "uint32"),
            (4, "period_ms", "uint32"))
    message("RespScanStatus", (1, "scan_finished", "bool"), (2, "result_count", "uint32"))
    message("CmdScanResult", (1, "start_index", "uint32"), (2, "count", "uint32"))
    message("WiFiScanResult", (1, "ssid", "bytes"), (2, "channel", "uint32"), (3, "rssi", "int32"), (4, "bssid", "bytes"),
            (5, "auth", "uint32"))
    message("RespScanResult", (1, "entries", "WiFiScanResult", "repeated"))
    message("WiFiScanPayload", (1, "msg", "uint32"), (2, "status", "enum:Status"), (10, "cmd_scan_start", "CmdScanStart", "oneof"),
            (11, "resp_scan_start", "Empty", "oneof"), (12, "cmd_scan_status", "Empty", "oneof"),
            (13, "resp_scan_status", "RespScanStatus", "oneof"), (14, "cmd_scan_result", "CmdScanResult", "oneof"),
            (15, "resp_scan_result", "RespScanResult", "oneof"), oneof="payload")
    # wifi_ctrl
    message("WiFiCtrlPayload", (1, "msg", "uint32"), (2, "status", "enum:Status"), (11, "cmd_ctrl_reset", "Empty", "oneof"),
            (12, "resp_ctrl_reset", "Empty", "oneof"), (13, "cmd_ctrl_reprov", "Empty", "oneof"),
            (14, "resp_ctrl_reprov", "Empty", "oneof"), oneof="payload")
    return f


_pool = descriptor_pool.DescriptorPool()
_pool.Add(_schema())


def msg(name):
    """The message class `name` of the schema above."""
    return message_factory.GetMessageClass(_pool.FindMessageTypeByName("espprov." + name))


# WifiStationState, WifiConnectFailedReason, WifiAuthMode values.
CONNECTED, CONNECTING, DISCONNECTED, CONNECTION_FAILED = 0, 1, 2, 3
AUTH_ERROR, NETWORK_NOT_FOUND = 0, 1
AUTH_OPEN, AUTH_WPA2_PSK = 0, 3


# -- Security --

N = int("FFFFFFFFFFFFFFFFC90FDAA22168C234C4C6628B80DC1CD129024E088A67CC74020BBEA63B139B22514A08798E3404DD"
        "EF9519B3CD3A431B302B0A6DF25F14374FE1356D6D51C245E485B576625E7EC6F44C42E9A637ED6B0BFF5CB6F406B7ED"
        "EE386BFB5A899FA5AE9F24117C4B1FE649286651ECE45B3DC2007CB8A163BF0598DA48361C55D39A69163FA8FD24CF5F"
        "83655D23DCA3AD961C62F356208552BB9ED529077096966D670C354E4ABC9804F1746C08CA18217C32905E462E36CE3B"
        "E39E772C180E86039B2783A2EC07A28FB5C55DF06F4C52C9DE2BCBF6955817183995497CEA956AE515D2261898FA0510"
        "15728E5A8AAAC42DAD33170D04507A33A85521ABDF1CBA64ECFB850458DBEF0A8AEA71575D060C7DB3970F85A6E1E4C7"
        "ABF5AE8CDB0933D71E8C94E04A25619DCEE3D2261AD2EE6BF12FFA06D98A0864D87602733EC86A64521F2B18177B200C"
        "BBE117577A615D6C770988C0BAD946E208E24FA074E5AB3143DB5BFCE0FD108E4B82D120A93AD2CAFFFFFFFFFFFFFFFF", 16)
G = 5
NLEN = 384


def H(*parts):
    h = hashlib.sha512()
    for p in parts:
        h.update(p)
    return h.digest()


def to_bytes(n, pad=False):
    b = n.to_bytes(NLEN, "big")
    return b if pad else (b.lstrip(b"\0") or b"\0")


def srp_verifier(username, password, salt):
    x = int.from_bytes(H(salt, H(username, b":", password)), "big")
    return pow(G, x, N)


def gcm_session(key, nonce):
    """Security 2's session cipher: (seal, open) with AES-256-GCM under K's first 32 bytes; every message
    of the session, either way, takes the next nonce (its last 4 bytes count, sec_patch_ver 1)."""
    aead = AESGCM(key[:32])
    counter = bytearray(nonce)

    def counted(operation):
        def run(b):
            result = operation(bytes(counter), b, None)
            counter[8:] = (int.from_bytes(counter[8:], "big") + 1).to_bytes(4, "big")
            return result
        return run
    return counted(aead.encrypt), counted(aead.decrypt)


class Refused(Exception):
    """The handler refused the request: the transport answers the write with an ATT error."""


class Session:
    """One connection's protocomm session: the handshake, then the cipher."""

    def __init__(self, unit):
        self.unit = unit
        self.step = 0
        self.cipher = None  # (encrypt, decrypt) once established

    def handle(self, data):
        SessionData = msg("SessionData")
        request = SessionData.FromString(data)
        if request.sec_ver != self.unit.security:
            raise Refused(f"security {request.sec_ver} asked of a security {self.unit.security} unit")
        reply = SessionData(sec_ver=self.unit.security)
        if self.unit.security == 0:
            reply.sec0.msg = 1
            reply.sec0.sr.status = 0
            self.cipher = (lambda b: b, lambda b: b)
            self.unit.count("sessions")
        elif self.unit.security == 1:
            self._sec1(request.sec1, reply.sec1)
        else:
            self._sec2(request.sec2, reply.sec2)
        return reply.SerializeToString()

    def _sec1(self, p, out):
        kind = p.WhichOneof("payload")
        if kind == "sc0":
            private = X25519PrivateKey.generate()
            self.device_key = private.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
            self.client_key = bytes(p.sc0.client_pubkey)
            shared = private.exchange(X25519PublicKey.from_public_bytes(self.client_key))
            pop = self.unit.pop
            key = bytes(a ^ b for a, b in zip(shared, hashlib.sha256(pop).digest())) if pop else shared
            random_ = os.urandom(16)
            ctr = Cipher(algorithms.AES(key), modes.CTR(random_)).encryptor()  # one keystream, both ways
            self.pending = (lambda b: ctr.update(b), lambda b: ctr.update(b))
            out.msg = 1
            out.sr0.status = 0
            out.sr0.device_pubkey = self.device_key
            out.sr0.device_random = random_
            self.step = 1
        elif kind == "sc1" and self.step == 1:
            encrypt, decrypt = self.pending
            if decrypt(bytes(p.sc1.client_verify_data)) != self.device_key:
                self.step = 0
                self.unit.count("failed_proofs")
                raise Refused("the client's verifier does not match: a wrong proof of possession")
            out.msg = 3
            out.sr1.status = 0
            out.sr1.device_verify_data = encrypt(self.client_key)
            self.cipher = self.pending
            self.unit.count("sessions")
        else:
            raise Refused("a security 1 message out of order")

    def _sec2(self, p, out):
        kind = p.WhichOneof("payload")
        if kind == "sc0":
            a = int.from_bytes(bytes(p.sc0.client_pubkey), "big")
            if a % N == 0 or not p.sc0.client_username:
                raise Refused("an unsafe A or no username")
            b = int.from_bytes(os.urandom(32), "big")
            k = int.from_bytes(H(to_bytes(N), to_bytes(G, pad=True)), "big")
            big_b = (k * self.unit.verifier + pow(G, b, N)) % N
            u = int.from_bytes(H(to_bytes(a, pad=True), to_bytes(big_b, pad=True)), "big")
            s = pow(a * pow(self.unit.verifier, u, N), b, N)
            key = H(to_bytes(s))
            hng = bytes(x ^ y for x, y in zip(H(to_bytes(N)), H(to_bytes(G, pad=True))))
            m = H(hng, H(bytes(p.sc0.client_username)), self.unit.salt, to_bytes(a), to_bytes(big_b), key)
            self.expected = (m, H(to_bytes(a), m, key), key)
            out.msg = 1
            out.sr0.status = 0
            out.sr0.device_pubkey = to_bytes(big_b)
            out.sr0.device_salt = self.unit.salt
            self.step = 1
        elif kind == "sc1" and self.step == 1:
            m, h_amk, key = self.expected
            if bytes(p.sc1.client_proof) != m:
                self.step = 0
                self.unit.count("failed_proofs")
                raise Refused("the client's proof does not match: a wrong username or proof of possession")
            nonce = os.urandom(8) + b"\0\0\0\1"
            seal, open_ = gcm_session(key, nonce)

            out.msg = 3
            out.sr1.status = 0
            out.sr1.device_proof = h_amk
            out.sr1.device_nonce = bytes(nonce)
            self.cipher = (seal, open_)
            self.unit.count("sessions")
        else:
            raise Refused("a security 2 message out of order")


# -- The unit --

class ESPDevice:
    """One ESP32-like unit (see the module docstring)."""

    def __init__(self, spec, link, state_dir, seed=1, adv_interval=0.020, defaults=None):
        d = dict(defaults or {})
        d.update(spec)
        self.id = d["id"]
        self.name = d.get("name", self.id)
        self.address = d["address"]
        self.security = int(d.get("security", 2))
        self.username = d.get("username", "wifiprov").encode()
        self.faults = {}
        for fault in d.get("faults", []):
            name, _, value = str(fault).partition(":")
            if name not in FAULTS:
                raise ValueError(f"{self.id}: unknown fault `{fault}`; known: {sorted(FAULTS)}")
            self.faults[name] = value or None
        label_pop = d.get("pop", f"pop-{self.id}")
        pop = (label_pop + "-other" if "wrong_pop" in self.faults else label_pop).encode()
        # What the unit keeps: security 1 needs the PoP itself; security 2 only the salt and verifier.
        self.pop = pop if self.security == 1 else None
        self.salt = hashlib.sha256(f"salt/{self.id}".encode()).digest()[:16]
        self.verifier = srp_verifier(self.username, pop, self.salt) if self.security == 2 else None
        ssid = d.get("ssid", "line-5-iot")
        passphrase = d.get("passphrase", "demo-line-5-passphrase")
        self.access_points = [
            {"ssid": ssid + ("-elsewhere" if "no_ap" in self.faults else ""),
             "sha256": hashlib.sha256((passphrase + ("-changed" if "wrong_passphrase" in self.faults else "")).encode()).hexdigest(),
             "channel": 6, "rssi": -48, "bssid": bytes.fromhex("240ac4000001")},
            {"ssid": "visitors", "sha256": None, "channel": 11, "rssi": -71, "bssid": bytes.fromhex("240ac4000002")},
        ]
        self.join_time = bumble_fleet.parse_duration(self.faults["slow_join"]) if self.faults.get("slow_join") \
            else bumble_fleet.parse_duration(str(d.get("join_time", "500ms")))
        self.ip = d.get("ip", "10.40.0.23")
        self.custom = list(d.get("custom_endpoints", ["custom-data"]))
        self.link = link
        self.adv_interval = float(d.get("adv_interval", adv_interval)) if not isinstance(d.get("adv_interval"), str) \
            else bumble_fleet.parse_duration(d["adv_interval"])
        self.rng = random.Random(f"{seed}/esp/{self.id}")
        self.state_path = os.path.join(state_dir, f"{self.id}.json")
        self.counters = {k: 0 for k in ("connections", "disconnections", "sessions", "failed_proofs", "set_configs",
                                        "applies", "status_requests", "scans", "custom_requests", "link_drops",
                                        "refused")}
        self.history = []
        self.ssid = None
        self.passphrase_sha256 = None
        self.station = "idle"
        self.join = None  # (ends_at, outcome) after apply
        self.dropped_on_apply = False
        self.sessions = {}  # connection -> Session
        self.responses = {}  # (connection, endpoint) -> bytes
        self.loop_start = None

        self.controller = PacedController(f"ctl-{self.id}", link=link, seed=seed)
        self.controller.le_legacy_advertiser.first_delay = self.controller.rng.uniform(0, self.adv_interval)
        self.device = Device(name=self.name, address=hci.Address(self.address),
                             host=QuietHost(controller_source=self.controller, controller_sink=self.controller))
        self.device.gatt_server.max_mtu = int(d.get("mtu", 256))
        base = bytes(UUID(SERVICE).to_bytes(force_128=True))  # little endian: bytes 12-13 are [2:4] reversed
        characteristics = []
        for i, name in enumerate(ENDPOINTS + self.custom):
            value = 0xFF50 + i
            raw = bytearray(base)
            raw[12], raw[13] = value & 0xFF, value >> 8
            uuid = UUID.from_bytes(bytes(raw))
            characteristics.append(Characteristic(
                uuid, Characteristic.Properties.READ | Characteristic.Properties.WRITE,
                Characteristic.READABLE | Characteristic.WRITEABLE,
                CharacteristicValue(read=lambda c, n=name: self._on_read(c, n), write=lambda c, v, n=name: self._on_write(c, n, v)),
                descriptors=[Descriptor(GATT_CHARACTERISTIC_USER_DESCRIPTION_DESCRIPTOR, Descriptor.READABLE, name.encode())]))
        self.device.add_services([Service(UUID(SERVICE), characteristics)])

    def count(self, name, n=1):
        self.counters[name] += n

    def event(self, kind, **fields):
        self.history.append({"event": kind, "at": round(asyncio.get_running_loop().time() - self.loop_start, 4), **fields})

    # -- Radio --

    async def start(self):
        self.loop_start = asyncio.get_running_loop().time()
        await self.device.power_on()
        self.device.on("connection", self._on_connection)
        await self._advertise()
        self.save()

    async def _advertise(self):
        if "silent" in self.faults:
            return
        await bumble_fleet.advertise_service(self.device, SERVICE, self.name, self.adv_interval)

    def _on_connection(self, connection):
        self.count("connections")
        self.sessions[connection] = Session(self)
        connection.on("disconnection", lambda reason: self._on_disconnection(connection, reason))
        self.save()

    def _on_disconnection(self, connection, reason):
        # The session ends with its link (protocomm closes it on the transport's disconnect).
        self.sessions.pop(connection, None)
        for key in [k for k in self.responses if k[0] is connection]:
            del self.responses[key]
        self.count("disconnections")
        self.event("disconnected", reason=int(reason))
        self.save()
        asyncio.get_running_loop().create_task(self._advertise())

    # -- Transport: a write is a request, the next read its response --

    def _on_read(self, connection, endpoint):
        return self.responses.get((connection, endpoint), b"")

    def _on_write(self, connection, endpoint, value):
        value = bytes(value)
        try:
            response = self._handle(connection, endpoint, value)
        except Refused as refusal:
            self.count("refused")
            self.event("refused", endpoint=endpoint, why=str(refusal))
            self.save()
            raise ATT_Error(ErrorCode.UNLIKELY_ERROR)
        except Exception as error:  # an undecodable request: refused like any other
            self.count("refused")
            self.event("refused", endpoint=endpoint, why=type(error).__name__)
            self.save()
            raise ATT_Error(ErrorCode.UNLIKELY_ERROR)
        if response is None:
            return
        self.responses[(connection, endpoint)] = response
        self.save()

    def _handle(self, connection, endpoint, data):
        session = self.sessions.get(connection)
        if endpoint == "proto-ver":
            caps = ["wifi_scan"] + (["no_sec"] if self.security == 0 else [])
            return json.dumps({"prov": {"ver": "v1.1", "sec_ver": self.security, "sec_patch_ver": 1, "cap": caps}}).encode()
        if session is None:
            raise Refused("no connection")
        if endpoint == "prov-session":
            return session.handle(data)
        if session.cipher is None:
            raise Refused("no session")
        encrypt, decrypt = session.cipher
        plain = decrypt(data)
        if endpoint == "prov-config":
            answer = self._config(connection, plain)
        elif endpoint == "prov-scan":
            answer = self._scan(plain)
        elif endpoint == "prov-ctrl":
            answer = self._ctrl(plain)
        elif endpoint in self.custom:
            self.count("custom_requests")
            self.event("custom", endpoint=endpoint, text=plain.decode(errors="replace")[:64])
            answer = (f"connected {self.ip}" if self.station_state() == "connected" else self.station_state()).encode() \
                if plain == b"wifi?" else b"SUCCESS"
        else:
            raise Refused("no such endpoint")
        if answer is None:
            return None
        return encrypt(answer)

    def station_state(self):
        if self.join is None:
            return self.station
        ends_at, outcome = self.join
        if asyncio.get_running_loop().time() < ends_at:
            return "connecting"
        return "connected" if outcome == "joins" else "connection_failed"

    def _config(self, connection, plain):
        Payload = msg("WiFiConfigPayload")
        request = Payload.FromString(plain)
        kind = request.WhichOneof("payload")
        reply = Payload()
        if kind == "cmd_set_config":
            c = request.cmd_set_config
            self.count("set_configs")
            self.ssid = bytes(c.ssid).decode(errors="replace")
            self.passphrase_sha256 = hashlib.sha256(bytes(c.passphrase)).hexdigest()  # never the passphrase
            self.event("set_config", ssid=self.ssid)
            reply.msg = 3
            reply.resp_set_config.status = 0
        elif kind == "cmd_apply_config":
            self.count("applies")
            ap = next((a for a in self.access_points if a["ssid"] == self.ssid), None)
            if ap is None:
                outcome = "not_found"
            elif ap["sha256"] is None or ap["sha256"] == self.passphrase_sha256:
                outcome = "joins"
            else:
                outcome = "auth"
            self.join = (asyncio.get_running_loop().time() + self.join_time, outcome)
            self.joined_ap = ap
            self.event("apply", outcome=outcome)
            if "drop_on_apply" in self.faults and not self.dropped_on_apply:
                # Applied, and the link goes instead of the answer.
                self.dropped_on_apply = True
                self.count("link_drops")
                self.save()
                asyncio.get_running_loop().create_task(connection.disconnect(LINK_LOST))
                return None
            reply.msg = 5
            reply.resp_apply_config.status = 0
        elif kind == "cmd_get_status":
            self.count("status_requests")
            reply.msg = 1
            r = reply.resp_get_status
            r.status = 0
            state = self.station_state()
            if state == "connected":
                ap = self.joined_ap
                r.sta_state = CONNECTED
                r.connected.ip4_addr = self.ip
                r.connected.auth_mode = AUTH_OPEN if ap["sha256"] is None else AUTH_WPA2_PSK
                r.connected.ssid = ap["ssid"].encode()
                r.connected.bssid = ap["bssid"]
                r.connected.channel = ap["channel"]
            elif state == "connection_failed":
                r.sta_state = CONNECTION_FAILED
                r.fail_reason = NETWORK_NOT_FOUND if self.join[1] == "not_found" else AUTH_ERROR
            elif state == "connecting":
                r.sta_state = CONNECTING
            else:
                r.sta_state = DISCONNECTED
            if self.station != state:
                self.station = state
                self.event("station", state=state)
        else:
            raise Refused(f"prov-config: {kind}")
        return reply.SerializeToString()

    def _scan(self, plain):
        Payload = msg("WiFiScanPayload")
        request = Payload.FromString(plain)
        kind = request.WhichOneof("payload")
        reply = Payload(status=0)
        if kind == "cmd_scan_start":
            self.count("scans")
            reply.msg = 1
            reply.resp_scan_start.SetInParent()
        elif kind == "cmd_scan_status":
            reply.msg = 3
            reply.resp_scan_status.scan_finished = True
            reply.resp_scan_status.result_count = len(self.access_points)
        elif kind == "cmd_scan_result":
            reply.msg = 5
            start, count = request.cmd_scan_result.start_index, request.cmd_scan_result.count
            if start >= len(self.access_points) or count == 0:
                reply.status = 4  # InvalidArgument
            for ap in self.access_points[start:start + count]:
                e = reply.resp_scan_result.entries.add()
                e.ssid, e.channel, e.rssi, e.bssid = ap["ssid"].encode(), ap["channel"], ap["rssi"], ap["bssid"]
                e.auth = AUTH_OPEN if ap["sha256"] is None else AUTH_WPA2_PSK
        else:
            raise Refused(f"prov-scan: {kind}")
        return reply.SerializeToString()

    def _ctrl(self, plain):
        Payload = msg("WiFiCtrlPayload")
        request = Payload.FromString(plain)
        kind = request.WhichOneof("payload")
        reply = Payload(status=0)
        if kind == "cmd_ctrl_reset":
            self.join, self.station = None, "idle"
            reply.msg = 2
            reply.resp_ctrl_reset.SetInParent()
        elif kind == "cmd_ctrl_reprov":
            self.join, self.station, self.ssid, self.passphrase_sha256 = None, "idle", None, None
            reply.msg = 4
            reply.resp_ctrl_reprov.SetInParent()
        else:
            raise Refused(f"prov-ctrl: {kind}")
        return reply.SerializeToString()

    # -- State --

    def snapshot(self):
        return {"id": self.id, "address": self.address, "security": self.security, "ssid": self.ssid,
                "passphrase_sha256": self.passphrase_sha256, "station": self.station_state(), "ip": self.ip,
                "faults": sorted(self.faults), "counters": dict(self.counters), "history": self.history[-200:]}

    def describe(self):
        """This unit in the fleet's ready line."""
        return {"id": self.id, "name": self.name, "address": self.address, "state_file": self.state_path,
                "security": self.security, "username": self.username.decode(), "faults": sorted(self.faults),
                "join_time_ms": round(self.join_time * 1000, 3)}

    def save(self):
        bumble_fleet.write_json_atomically(self.state_path, self.snapshot())


# -- The fleet launcher's hook (bumble_fleet.py) --

def add_arguments(parser):
    """The --esp-* options of bumble_fleet.py."""
    group = parser.add_argument_group("ESP units (esp_device.py: ESP32-like Wi-Fi provisioning over BLE)")
    group.add_argument("--esp-devices", type=int, default=0, help="number of ESP units ESP-0001... (E5:00:00:00:00:01...)")
    group.add_argument("--esp-security", type=int, choices=[0, 1, 2], default=2, help="protocomm security scheme (default 2)")
    group.add_argument("--esp-ssid", default="line-5-iot", help="the site's SSID (default line-5-iot)")
    group.add_argument("--esp-passphrase", default="demo-line-5-passphrase", help="the site's passphrase")
    group.add_argument("--esp-join-time", default="500ms", help="apply → connected (default 500ms)")
    group.add_argument("--esp-fault", action="append", default=[], metavar="INDEX:FAULT[:ARG]",
                       help="a fault of unit INDEX (1-based): wrong_pop, no_ap, wrong_passphrase, slow_join:T, drop_on_apply")


def create(args, link, state_dir, seed, adv_interval):
    """The ESP units the options ask for (ValueError with the reason when they are wrong). Unit i's PoP is
    `pop-ESP-000i` (its label; the inventory gives the same)."""
    defaults = {"security": args.esp_security, "ssid": args.esp_ssid, "passphrase": args.esp_passphrase,
                "join_time": args.esp_join_time}
    specs = [{"id": f"ESP-{i:04d}", "name": f"PROV_{i:04d}", "address": f"E5:00:00:00:{i >> 8:02X}:{i & 0xFF:02X}"}
             for i in range(1, args.esp_devices + 1)]
    for text in args.esp_fault:
        index, _, fault = text.partition(":")
        if not index.isdigit() or not 1 <= int(index) <= len(specs) or not fault:
            raise ValueError(f"--esp-fault `{text}`: write INDEX:FAULT with INDEX from 1 to {len(specs)}")
        specs[int(index) - 1].setdefault("faults", []).append(fault)
    return [ESPDevice(spec, link, state_dir, seed=seed, adv_interval=adv_interval, defaults=defaults) for spec in specs]
