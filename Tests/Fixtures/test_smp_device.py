#!/usr/bin/env python3
"""Tests of the SMP fixture (smp_device.py, mcuboot_image.py) against the smpmgr-like peer (smp_peer.py).

    cd Tests/Fixtures && ../../.venv/bin/python3 -m unittest -v test_smp_device

Each radio test runs SMP devices and a station controller on one PacedLink in-process, with Bumble's own
host on the station as the central. The peer builds its requests with the `smp` package, the device
parses them with its own codec: two implementations meet. Assertions are on what the device holds and
what it answered, never on how long something took.
"""

import asyncio
import hashlib
import os
import subprocess
import sys
import tempfile
import unittest

import cbor2
from bumble import hci
from bumble.device import Device
from smp import image_management as img

import mcuboot_image
import smp_device
from fleet_radio import LinkTiming, PacedLink, StationController, airtime
from smp_device import Bootloader, Header, Image, SMPDevice
from smp_peer import SMPClient, SMPErrorResponse

TIMEOUT = 20.0
HERE = os.path.dirname(os.path.abspath(__file__))


def image(version, size=6000, flags=0, seed="app"):
    body = (hashlib.sha256(f"{seed}/{version}".encode()).digest() * (size // 32 + 1))[:size]
    return mcuboot_image.build(body, version, flags=flags)


def hash_of(data):
    return mcuboot_image.parse(data).hash


class Line:
    """SMP devices and one station controller on one link; the station driven by a Bumble host."""

    def __init__(self, specs, latency=(0.0, 0.0), rate=None, **defaults):
        self.state_dir = tempfile.mkdtemp(prefix="smp-test-")
        self.link = PacedLink(LinkTiming(latency, seed=3, rate=rate))
        self.defaults = {"boot_time": 0.05, "reset_delay": 0.02, "flash_rate": 1e7, **defaults}
        self.specs = [dict({"id": f"DFU-{i:04d}", "address": f"F1:00:00:00:00:{i:02X}"}, **spec)
                      for i, spec in enumerate(specs, start=1)]
        self.devices = []
        self.host = None

    async def start(self):
        self.devices = [SMPDevice(spec, self.link, self.state_dir, seed=3, defaults=self.defaults)
                        for spec in self.specs]
        for device in self.devices:
            await device.start()
        controller = StationController("station", link=self.link, public_address="00:AA:00:00:00:01", seed=3)
        self.host = Device.with_hci("host", hci.Address("C0:00:00:00:00:01"), controller, controller)
        await self.host.power_on()
        return self

    async def client(self, index=1, mtu=517):
        return await SMPClient.connect(self.host, self.devices[index - 1].address, timeout=TIMEOUT, mtu=mtu)

    def device(self, index=1):
        return self.devices[index - 1]


def run(coroutine):
    return asyncio.run(asyncio.wait_for(coroutine, 120))


async def reset_and_reconnect(line, client, index=1):
    """Reset, wait for the device to drop the link, and connect again once it is back."""
    await client.reset()
    await asyncio.wait_for(client.disconnected.wait(), TIMEOUT)
    return await line.client(index)


async def boot_test_image(line, new, index=1):
    """Uploads `new`, marks it for test and resets; returns a client on the rebooted device."""
    client = await line.client(index)
    await client.upload(new)
    await client.image_test(hash_of(new))
    return await reset_and_reconnect(line, client, index)


def upload_chunks(data, count, size, first_seq):
    """`count` image upload requests of `size` data bytes each, from offset 0, as packets."""
    packets = []
    for i in range(count):
        fields = {"off": i * size, "data": data[i * size:(i + 1) * size]}
        if i == 0:
            fields.update(len=len(data), sha=hashlib.sha256(data).digest(), image=0)
        body = cbor2.dumps(fields)
        packets.append(Header(2, 1, 0, len(body), 1, first_seq + i, 1).encode() + body)
    return packets


async def burst(client, device, packets):
    """Sends `packets` while the device's worker is held, so that all of them have arrived (taken a buffer
    or been dropped) before it takes an answer's buffer; returns the sequence numbers answered, once every
    packet is accounted for (answered, or counted as dropped: no waiting for what does not come)."""
    dropped_before = sum(device.drops.values())
    device.worker_gate.clear()
    target = device.writes + len(packets)
    for packet in packets:
        await client.send_raw(packet)
    while device.writes < target:
        device.wrote.clear()
        await asyncio.wait_for(device.wrote.wait(), TIMEOUT)
    device.worker_gate.set()
    answered = set()
    while len(answered) + sum(device.drops.values()) - dropped_before < len(packets):
        answered.add((await asyncio.wait_for(client.responses.get(), TIMEOUT))[6])
    return answered


async def raw(client, header, body=b""):
    """Sends a hand-built packet (its length set to the body's); returns the response's (smp Header, body)."""
    header.length = len(body)
    await client.send_raw(header.encode() + body)
    return await client.receive(header.seq, TIMEOUT)


class HeaderAndImageTests(unittest.TestCase):
    def test_headers_match_the_smp_packages_byte_for_byte(self):
        request = img.ImageUploadWriteRequest(off=0, data=b"ab", len=10, sequence=0x2A)
        packet = bytes(request.BYTES)
        header = Header.parse(packet)
        self.assertEqual((header.op, header.version, header.group, header.seq, header.command),
                         (2, 1, 1, 0x2A, 1))
        self.assertEqual(header.length, len(packet) - 8)
        self.assertEqual(header.encode(), packet[:8])
        # Golden: write, version 2, 3 data bytes, group 8, sequence 7, command 2.
        self.assertEqual(Header(2, 1, 0, 3, 8, 7, 2).encode().hex(), "0a00000300080702")
        with self.assertRaises(ValueError):
            Header.parse(b"\x0a\x00\x00")

    def test_images_read_like_imgtools_and_bad_ones_are_refused(self):
        body = os.path.join(tempfile.mkdtemp(), "body.bin")
        signed = body + ".signed"
        with open(body, "wb") as f:
            f.write(bytes(range(256)) * 20)
        imgtool = os.path.join(os.path.dirname(sys.executable), "imgtool")
        subprocess.run([imgtool, "sign", "--version", "3.2.1+9", "--header-size", "0x200", "--slot-size", "0x40000",
                        "--pad-header", body, signed], check=True, capture_output=True)
        with open(signed, "rb") as f:
            data = f.read()
        info = mcuboot_image.parse(data)
        self.assertEqual(str(info.version), "3.2.1.9")
        self.assertTrue(info.hash_valid and info.bootable)
        self.assertEqual(info.hash, hashlib.sha256(data[:0x200 + 5120]).digest())
        self.assertEqual(mcuboot_image.build(bytes(range(256)) * 20, "3.2.1.9"), data)
        corrupted = bytearray(data)
        corrupted[0x300] ^= 1
        self.assertFalse(mcuboot_image.parse(corrupted).hash_valid)
        for bad in (data[:31], data[:0x200 + 100], b"\x00" * 64, data[:-1], data[:-36]):
            with self.assertRaises(mcuboot_image.ImageError):
                mcuboot_image.parse(bad)
        self.assertFalse(mcuboot_image.parse(image("1.0.0", flags=mcuboot_image.IMAGE_F_NON_BOOTABLE)).bootable)

    def test_a_per_link_rate_sets_the_airtime_of_a_pdu(self):
        timing = LinkTiming((0.0075, 0.0075), rate=400_000)
        # 251 bytes at 1M take 2.4 ms on the PHY; at 400 kbit/s they hold the link 5.02 ms.
        self.assertAlmostEqual(timing.airtime(251, 251, 1), 251 * 8 / 400_000)
        # A link faster than its PHY is bound by the PHY.
        self.assertEqual(LinkTiming(rate=1e9).airtime(251, 251, 1), airtime(251, 251, 1))
        self.assertEqual(smp_device.parse_rate("400kbit/s", "bits"), 400_000)
        self.assertEqual(smp_device.parse_rate("100KB/s", "bytes"), 100_000)
        with self.assertRaises(ValueError):
            smp_device.parse_rate("fast", "bits")


class BootloaderTests(unittest.TestCase):
    """MCUboot's decisions, without a radio."""

    def setUp(self):
        old, new = image("1.0.0"), image("2.0.0")
        self.old, self.new = hash_of(old), hash_of(new)
        self.boot = Bootloader(Image(old, mcuboot_image.parse(old)), 0x60000)
        self.boot.set_secondary(new)

    def test_a_test_image_runs_unconfirmed_and_is_reverted_unless_confirmed(self):
        self.boot.pending = "test"
        self.assertEqual(self.boot.boot(), ["swap"])
        self.assertEqual((self.boot.primary.info.hash, self.boot.primary_confirmed), (self.new, False))
        self.assertEqual(self.boot.secondary_info.hash, self.old)
        self.assertEqual(self.boot.boot(), ["revert"])
        self.assertEqual((self.boot.primary.info.hash, self.boot.primary_confirmed), (self.old, True))
        self.assertEqual(self.boot.states()[1]["hash"], self.new)
        self.assertNotIn("pending", self.boot.states()[1])

    def test_a_confirmed_test_image_stays_and_a_permanent_one_needs_no_confirm(self):
        self.boot.pending = "test"
        self.boot.boot()
        self.boot.primary_confirmed = True
        self.assertEqual(self.boot.boot(), [])
        self.assertEqual(self.boot.primary.info.hash, self.new)
        other = Bootloader(self.boot.primary, 0x60000)
        other.set_secondary(image("3.0.0"))
        other.pending = "permanent"
        self.assertEqual(other.boot(), ["swap"])
        self.assertTrue(other.primary_confirmed)

    def test_a_failed_swap_or_a_corrupt_image_keeps_the_old_image_and_erases_slot_1(self):
        self.boot.pending = "test"
        self.assertEqual(self.boot.boot(failed_swap=True), ["swap_failed"])
        self.assertEqual(self.boot.primary.info.hash, self.old)
        self.assertIsNone(self.boot.secondary_info)
        corrupt = bytearray(image("2.0.0"))
        corrupt[0x280] ^= 0xFF
        self.boot.set_secondary(corrupt)
        self.boot.pending = "test"
        self.assertEqual(self.boot.boot(), ["swap_failed"])
        self.assertEqual(self.boot.primary.info.hash, self.old)

    def test_a_test_image_that_crashes_is_reverted_at_once(self):
        self.boot.pending = "test"
        self.assertEqual(self.boot.boot(crashes_on_test=True), ["swap", "crash", "revert"])
        self.assertEqual((self.boot.primary.info.hash, self.boot.primary_confirmed), (self.old, True))


class RadioTests(unittest.TestCase):
    """A central (smp_peer.SMPClient on Bumble's host) against devices on the fleet's radio."""

    def test_upload_test_reset_swap_and_confirm(self):
        new = image("2.0.0", size=30_000)

        async def scenario():
            line = await Line([{}], latency=(0.001, 0.001), rate=400_000).start()
            client = await line.client()
            self.assertEqual(await client.parameters(), {"buf_size": 2475, "buf_count": 4})
            self.assertEqual(await client.echo("hi"), "hi")
            states = await client.image_state()
            self.assertEqual([(s["slot"], s["version"], s.get("active"), s.get("confirmed")) for s in states],
                             [(0, "1.0.0", True, True)])
            answer = await client.upload(new)
            self.assertEqual(answer, {"off": len(new), "match": True})
            states = await client.image_state()
            self.assertEqual(states[1]["hash"], hash_of(new))
            self.assertTrue(states[1]["bootable"])
            self.assertNotIn("pending", states[1])
            states = await client.image_test(hash_of(new))
            self.assertTrue(states[1]["pending"])
            client = await reset_and_reconnect(line, client)
            states = await client.image_state()
            self.assertEqual((states[0]["hash"], states[0].get("confirmed")), (hash_of(new), None))
            self.assertEqual(states[1]["version"], "1.0.0")
            await client.image_confirm()
            device = line.device()
            self.assertEqual(device.snapshot()["running"],
                             {"version": "2.0.0", "hash": hash_of(new).hex(), "confirmed": True})
            counters = device.counters
            self.assertEqual((counters["uploads_completed"], counters["swaps"], counters["resets"], counters["boots"]),
                             (1, 1, 1, 2))
            self.assertEqual(counters["upload_bytes_written"], len(new))
            # A reset after the confirm keeps the new image.
            client = await reset_and_reconnect(line, client)
            self.assertEqual((await client.image_state())[0]["hash"], hash_of(new))
            self.assertEqual(device.counters["reverts"], 0)

        run(scenario())

    def test_an_unconfirmed_image_is_reverted_at_the_next_boot(self):
        new = image("2.0.0")

        async def scenario():
            line = await Line([{}]).start()
            client = await boot_test_image(line, new)
            self.assertEqual((await client.image_state())[0]["version"], "2.0.0")
            client = await reset_and_reconnect(line, client)
            states = await client.image_state()
            self.assertEqual((states[0]["version"], states[0].get("confirmed")), ("1.0.0", True))
            self.assertEqual((states[1]["hash"], states[1].get("pending")), (hash_of(new), None))
            self.assertEqual(line.device().counters["reverts"], 1)

        run(scenario())

    def test_a_dropped_link_resumes_from_the_devices_offset(self):
        new = image("2.0.0", size=40_000)

        async def scenario():
            line = await Line([{"faults": ["drop_mid_upload:0.4"]}], latency=(0.001, 0.001)).start()
            client = await line.client()
            with self.assertRaises(ConnectionError):
                await client.upload(new)
            device = line.device()
            self.assertEqual(device.counters["link_drops"], 1)
            dropped_at = device.upload.offset
            self.assertGreater(dropped_at, 0.4 * len(new))
            client = await line.client()
            answer = await client.upload(new)
            self.assertTrue(answer["match"])
            self.assertEqual(device.counters["uploads_resumed"], 1)
            self.assertEqual(device.counters["uploads_started"], 1)
            self.assertEqual(device.counters["upload_bytes_written"], len(new))
            # Each byte crossed once, but for the chunk in flight when the link dropped and the resume's
            # first request (which carries data the device already has).
            self.assertLessEqual(device.counters["upload_bytes_received"], 1.1 * len(new))
            self.assertEqual(hashlib.sha256(bytes(device.boot.secondary)).digest(), hashlib.sha256(new).digest())

        run(scenario())

    def test_a_request_at_another_offset_is_answered_with_the_devices(self):
        new = image("2.0.0")

        async def scenario():
            line = await Line([{}]).start()
            client = await line.client()
            sha = hashlib.sha256(new).digest()
            first = await client.transact(client.model(img.ImageUploadWriteRequest, off=0, data=new[:100],
                                                       len=len(new), sha=sha, image=0))
            self.assertEqual(first, {"off": 100})
            ahead = await client.transact(client.model(img.ImageUploadWriteRequest, off=400, data=new[400:500]))
            self.assertEqual(ahead, {"off": 100})
            self.assertEqual(line.device().counters["upload_bytes_written"], 100)

        run(scenario())

    def test_a_failed_swap_keeps_the_old_image(self):
        new = image("2.0.0")

        async def scenario():
            line = await Line([{"faults": ["failed_swap"]}]).start()
            client = await boot_test_image(line, new)
            states = await client.image_state()
            self.assertEqual([s["version"] for s in states], ["1.0.0"])
            self.assertEqual(line.device().counters["swap_failures"], 1)

        run(scenario())

    def test_a_crashing_image_is_reverted_by_the_bootloader(self):
        new = image("2.0.0")

        async def scenario():
            line = await Line([{"faults": ["revert"]}]).start()
            client = await boot_test_image(line, new)
            states = await client.image_state()
            self.assertEqual((states[0]["version"], states[0].get("confirmed")), ("1.0.0", True))
            self.assertEqual(states[1]["version"], "2.0.0")
            counters = line.device().counters
            self.assertEqual((counters["swaps"], counters["crashes"], counters["reverts"]), (1, 1, 1))

        run(scenario())

    def test_lost_responses_are_recovered_by_sending_again(self):
        new = image("2.0.0", size=20_000)

        async def scenario():
            line = await Line([{"faults": ["lose_responses:0.2"]}]).start()
            client = await line.client()
            client_timeout = 0.3

            async def transact(message, timeout=client_timeout, attempts=20):
                return await SMPClient.transact(client, message, timeout, attempts)
            client.transact = transact
            answer = await client.upload(new)
            self.assertTrue(answer["match"])
            device = line.device()
            self.assertGreater(device.counters["responses_lost"], 0)
            self.assertGreater(client.timeouts, 0)
            self.assertEqual(device.counters["upload_bytes_written"], len(new))

        run(scenario())

    def test_buffers_are_shared_by_requests_and_responses(self):
        async def scenario():
            line = await Line([{}], latency=(0.001, 0.001)).start()
            client = await line.client()
            device = line.device()
            chunks = upload_chunks(image("2.0.0"), 7, 100, 10)
            # Three in flight on four buffers: all served.
            self.assertEqual(await burst(client, device, chunks[:3]), {10, 11, 12})
            self.assertEqual(sum(device.drops.values()), 0)
            # Four in flight take all four buffers: the first finds none for its answer and is lost
            # (unanswered, not executed); the other three are served (the worker's order, as on a device
            # whose radio delivered them before the SMP work queue ran).
            self.assertEqual(await burst(client, device, chunks[3:]), {14, 15, 16})
            self.assertEqual(device.drops, {"no_buffer": 0, "no_response_buffer": 1, "too_long": 0, "malformed": 0})
            self.assertEqual(device.pool.peak, 4)
            # The lost one was the chunk at 300: the next ones were answered with the device's offset.
            self.assertEqual(device.upload.offset, 300)

        run(scenario())

    def test_a_device_with_fewer_buffers_than_it_reports_overflows(self):
        async def scenario():
            line = await Line([{"faults": ["buffer_overflow:2"]}], latency=(0.001, 0.001)).start()
            client = await line.client()
            self.assertEqual((await client.parameters())["buf_count"], 4)
            device = line.device()
            # Three in flight fit the four buffers it reports, not its two: the third is dropped as it
            # arrives, the first finds no buffer for its answer.
            self.assertEqual(await burst(client, device, upload_chunks(image("2.0.0"), 3, 100, 30)), {31})
            self.assertEqual((device.drops["no_buffer"], device.drops["no_response_buffer"]), (1, 1))

        run(scenario())

    def test_a_not_bootable_image_is_reported_and_cannot_be_tested(self):
        new = image("2.0.0")

        async def scenario():
            line = await Line([{"faults": ["not_bootable"]}]).start()
            client = await line.client()
            await client.upload(new)
            states = await client.image_state()
            self.assertFalse(states[1]["bootable"])
            with self.assertRaises(SMPErrorResponse) as error:
                await client.image_test(hash_of(new))
            self.assertEqual(error.exception.group, 1)
            self.assertIsNone(line.device().boot.pending)

        run(scenario())

    def test_reassembly_and_request_sizes(self):
        big = cbor2.dumps({"d": "x" * 1200})

        async def scenario():
            # Without reassembly the five writes of one request are five requests: with eight buffers they
            # and the first one's answer fit, however they are timed.
            line = await Line([{}, {"reassembly": False, "buf_count": 8}, {"buf_size": 1000}]).start()
            # With reassembly a request may span writes.
            client = await line.client(1, mtu=247)
            header, body = await raw(client, Header(2, 1, 0, len(big), 0, 1, 0), big)
            self.assertEqual(body, {"r": "x" * 1200})
            await client.connection.disconnect()
            # Without it, the first write is a request of its own, shorter than its header says: rc 9 (the
            # writes after it are read as requests too, and answered as such).
            client = await line.client(2, mtu=247)
            header, body = await raw(client, Header(2, 1, 0, len(big), 0, 2, 0), big)
            self.assertEqual(body, {"rc": smp_device.ECORRUPT})
            await client.connection.disconnect()
            # Longer than the device's buffer: dropped unanswered, and so is each write after it, whose
            # bytes read as a header claim more than the buffer holds (the fence after them is answered).
            client = await line.client(3, mtu=247)
            await client.send_raw(Header(2, 1, 0, len(big), 0, 3, 0).encode() + big)
            fence = await raw(client, Header(2, 1, 0, 0, 0, 4, 0), cbor2.dumps({"d": "f"}))
            self.assertEqual(fence[1], {"r": "f"})
            self.assertGreaterEqual(line.device(3).drops["too_long"], 1)
            self.assertTrue(client.responses.empty())

        run(scenario())

    def test_versions_one_and_two_answer_errors_each_their_way(self):
        async def scenario():
            line = await Line([{}, {"smp_v2": False, "params": False}]).start()
            client = await line.client(1)
            unknown_hash = cbor2.dumps({"hash": b"\x01" * 32, "confirm": False})
            header, body = await raw(client, Header(2, 1, 0, len(unknown_hash), 1, 5, 0), unknown_hash)
            self.assertEqual((header.version, body), (1, {"err": {"group": 1, "rc": 8}}))
            header, body = await raw(client, Header(2, 0, 0, len(unknown_hash), 1, 6, 0), unknown_hash)
            self.assertEqual((header.version, body), (0, {"rc": smp_device.EINVAL}))
            header, body = await raw(client, Header(0, 1, 0, 1, 77, 7, 0), b"\xa0")
            self.assertEqual(body, {"rc": smp_device.ENOTSUP})
            header, body = await raw(client, Header(0, 2, 0, 1, 0, 8, 6), b"\xa0")
            self.assertEqual((header.version, body), (1, {"rc": smp_device.UNSUPPORTED_TOO_NEW}))
            await client.connection.disconnect()
            old = await line.client(2)
            header, body = await raw(old, Header(2, 1, 0, len(unknown_hash), 1, 9, 0), unknown_hash)
            self.assertEqual((header.version, body), (0, {"rc": smp_device.EINVAL}))
            with self.assertRaises(SMPErrorResponse) as error:
                await old.parameters()
            self.assertEqual(error.exception.rc, smp_device.ENOTSUP)

        run(scenario())

    def test_upgrade_only_and_downgrade_prevention_refuse_older_images(self):
        older = image("0.9.0")

        async def scenario():
            line = await Line([{}, {"downgrade_prevention": True}]).start()
            client = await line.client(1)
            with self.assertRaises(SMPErrorResponse) as error:
                await client.upload(older, upgrade=True)
            self.assertEqual((error.exception.group, error.exception.rc), (1, 27))
            self.assertEqual((await client.upload(older))["off"], len(older))  # without the flag: accepted
            await client.connection.disconnect()
            strict = await line.client(2)
            with self.assertRaises(SMPErrorResponse):
                await strict.upload(older)
            self.assertEqual(line.device(2).counters["uploads_started"], 0)

        run(scenario())

    def test_settings_survive_a_reset_only_when_saved(self):
        from smp import settings_management as settings

        async def scenario():
            line = await Line([{"settings": {"app/interval": "0a000000"}}]).start()
            client = await line.client()
            value = await client.transact(client.model(settings.ReadSettingRequest, name="app/interval"))
            self.assertEqual(value["val"], bytes.fromhex("0a000000"))
            await client.transact(client.model(settings.WriteSettingRequest, name="app/interval", val=b"\x3c\0\0\0"))
            await client.transact(client.model(settings.WriteSettingRequest, name="app/name", val=b"line-7"))
            await client.transact(client.model(settings.SaveSettingsRequest))
            await client.transact(client.model(settings.WriteSettingRequest, name="app/unsaved", val=b"\x01"))
            client = await reset_and_reconnect(line, client)
            state = line.device().snapshot()
            self.assertEqual(state["settings"], {"app/interval": "3c000000", "app/name": "6c696e652d37"})
            with self.assertRaises(SMPErrorResponse) as error:
                await client.transact(client.model(settings.ReadSettingRequest, name="app/unsaved"))
            self.assertEqual((error.exception.group, error.exception.rc), (3, 3))

        run(scenario())

    def test_file_upload_resumes_and_its_sha256_is_the_files(self):
        from smp import file_management as fs
        content = bytes(range(256)) * 9

        async def scenario():
            line = await Line([{}]).start()
            client = await line.client()
            answer = await client.transact(client.model(fs.FileUploadRequest, name="/lfs/cert.der", off=0,
                                                        data=content[:1000], len=len(content)))
            self.assertEqual(answer["off"], 1000)
            status = await client.transact(client.model(fs.FileStatusRequest, name="/lfs/cert.der"))
            self.assertEqual(status["len"], 1000)
            wrong = await client.transact(client.model(fs.FileUploadRequest, name="/lfs/cert.der", off=1500,
                                                       data=content[1500:2000]))
            self.assertEqual(wrong["off"], 1000)
            await client.transact(client.model(fs.FileUploadRequest, name="/lfs/cert.der", off=1000,
                                               data=content[1000:]))
            digest = await client.transact(client.model(fs.FileHashChecksumRequest, name="/lfs/cert.der",
                                                        type="sha256"))
            self.assertEqual(digest["output"], hashlib.sha256(content).digest())
            self.assertEqual(line.device().snapshot()["files"]["/lfs/cert.der"]["len"], len(content))

        run(scenario())

    def test_the_state_file_says_what_the_device_holds(self):
        new = image("2.0.0")

        async def scenario():
            line = await Line([{}]).start()
            client = await line.client()
            await client.upload(new)
            await client.image_test(hash_of(new))
            import json
            with open(line.device().state_path) as f:
                state = json.load(f)
            self.assertEqual(state["pending"], "test")
            self.assertEqual(state["slots"][1]["hash"], hash_of(new).hex())
            self.assertEqual(state["counters"]["uploads_completed"], 1)
            self.assertEqual(state["running"]["version"], "1.0.0")

        run(scenario())


if __name__ == "__main__":
    unittest.main()
