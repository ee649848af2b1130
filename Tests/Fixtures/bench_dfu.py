#!/usr/bin/env python3
"""DFU throughput on the Bumble SMP fixture: `provision run` with a dfu workflow (when the binary has the
step) and the smpmgr-like peer (smp_peer.py), each figure printed against the cell's physical bound.

    swift build -c release --product provision
    Tests/Fixtures/bench_dfu.sh                      # 1 and 16 devices, the issue's conditions
    Tests/Fixtures/bench_dfu.sh --devices 16 --sides baseline --chunk mtu,buf

The conditions (issue 18): link latency 7.5 ms each way, 400 kbit/s per link (each direction), a 256 KiB
image, flash writing at 100 KB/s, devices with 4 buffers of 2475 bytes and reassembly, ATT MTU up to 498.
Every cell starts a fresh fleet (bumble_fleet.py --stations 2 --devices 0 --smp-devices N ...): provision
goes through station 1, the peer through station 2 (after provision's run the devices are on the new
image; the peer then uploads the same image's twin with another version, so it uploads in full too).

THE PHYSICAL BOUND of a cell, in image bytes per second per device, is the least of:
- the link: `--link-rate` bits/s of L2CAP bytes, times the share of them that is image data when every
  request is as large as the device's buffer (SMP header, CBOR keys, ATT and L2CAP headers per write);
- the controller: the station's LE ACL buffers are 27 bytes, and the fixture's controller sends each as
  an LL PDU of its own (as a controller without DLE-sized buffers does), so one PDU's airtime per 27
  bytes at the PHY of the link (1M for the peer, which asks for no other; 2M for provision, which does);
- the device: its one worker writes a request's data at `--smp-flash-rate`, then waits for the answer
  to cross the link (a link latency and the answer's airtime) before it takes the next request, as
  Zephyr's SMP work queue does; with buffer-sized requests that is below the flash rate alone.
N devices: N times that (each link of the fixture has its own air; a real controller shares one radio
among its links, which the output also states). Each measured figure is printed as a fraction of it.
The fixture is one Python process emulating every radio and peripheral: per cell the output also prints
its CPU time per KB uploaded and what one whole core would carry at that cost, in all devices together
(the fixture's own ceiling; on a loaded machine it gets less than a core).
For the one-request-at-a-time peer the output also prints what its request/response cycle allows
(two link latencies, the request's airtime, the flash write and the answer per chunk): the ceiling of
that way of working, not of the radio.
"""

import argparse
import datetime
import json
import math
import os
import platform
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import mcuboot_image  # noqa: E402
from bench_hci_vs_bumble import ROOT, Fleet, run_measured  # noqa: E402
from fleet_radio import PHY_1M, PHY_2M, StationController, pdu_airtime  # noqa: E402
from smp_device import parse_rate  # noqa: E402

IMAGE_SIZE = 256 * 1024
# Bytes of an upload request besides its data: the SMP header, and CBOR for {"off": u32, "data": bstr}
# (map 1, "off" 4, a 32-bit offset 5, "data" 5, a byte string's 16-bit length 3).
REQUEST_OVERHEAD = 8 + 1 + 4 + 5 + 5 + 3
ATT_WRITE_HEADER = 3
L2CAP_HEADER = 4
# The answer {"off": u32} in its own notification: header 8, CBOR 10, ATT 3, L2CAP 4.
ANSWER_BYTES = 8 + 10 + ATT_WRITE_HEADER + L2CAP_HEADER


def make_image(path, version, size=IMAGE_SIZE, seed="bench"):
    """An MCUboot image of exactly `size` bytes (header 0x200, SHA-256 TLV of 40 bytes)."""
    body_size = size - 0x200 - 40
    block = (seed + version).encode() * 64
    body = (block * (body_size // len(block) + 1))[:body_size]
    data = mcuboot_image.build(body, version)
    assert len(data) == size
    with open(path, "wb") as f:
        f.write(data)
    return data


def wire_bytes(request, mtu):
    """L2CAP bytes one request of `request` bytes takes, written in MTU - 3 pieces."""
    writes = math.ceil(request / (mtu - 3))
    return request + writes * (ATT_WRITE_HEADER + L2CAP_HEADER)


def bounds(args):
    """The cell's physical bound per device (image bytes/s) and what sets it, per PHY."""
    rate = args.link_rate_bps / 8  # L2CAP bytes/s each direction
    data = args.buf_size - REQUEST_OVERHEAD
    share = data / wire_bytes(args.buf_size, args.mtu)
    acl = StationController.le_acl_data_packet_length
    answer_air = max(pdu_airtime(ANSWER_BYTES, PHY_1M), ANSWER_BYTES * 8 / args.link_rate_bps)
    out = {"link": rate * share, "device": data / (data / args.flash_rate + args.latency_s + answer_air)}
    for name, phy in (("1M", PHY_1M), ("2M", PHY_2M)):
        # Each 27-byte ACL packet is one LL PDU; the link's rate also holds it at least bytes*8/rate.
        per_packet = max(pdu_airtime(acl, phy), acl * 8 / args.link_rate_bps)
        out[f"controller_{name}"] = acl / per_packet * share
    return out


def bound_for(b, phy):
    limits = {"link": b["link"], "controller": b[f"controller_{phy}"], "device": b["device"]}
    setter = min(limits, key=limits.get)
    return limits[setter], setter


def one_at_a_time_ceiling(args, chunk_request, phy):
    """Image bytes/s a client waiting for each answer can reach: per request two link latencies, the
    request's and the answer's airtime, the flash write of its data."""
    data = chunk_request - REQUEST_OVERHEAD - (1 if chunk_request < 300 else 0)
    acl = StationController.le_acl_data_packet_length
    per_byte = max(pdu_airtime(acl, phy) / acl, 8 / args.link_rate_bps)
    cycle = (2 * args.latency_s + wire_bytes(chunk_request, args.mtu) * per_byte + ANSWER_BYTES * per_byte
             + data / args.flash_rate)
    return data / cycle


def fleet_args(args, devices):
    return ["--smp-devices", str(devices), "--link-rate", args.link_rate, "--smp-buf-size", str(args.buf_size),
            "--smp-buf-count", str(args.buf_count), "--smp-flash-rate", args.flash, "--smp-mtu", str(args.mtu),
            "--smp-boot-time", args.boot_time] + args.fleet_arg


def dfu_workflow(path):
    with open(path, "w") as f:
        f.write("name: dfu-bench\n"
                "defaults: { timeout: 30s }\n"
                "steps:\n"
                "  - connect: { mtu: 498, timeout: 20s }\n"
                "  - dfu: { image: \"${firmware}\", confirm: after_boot, reboot_timeout: 60s }\n"
                "  - disconnect: {}\n")


def dfu_inventory(path, devices, image):
    with open(path, "w") as f:
        f.write("devices:\n")
        for i in range(1, devices + 1):
            f.write(f'  - {{ id: DFU-{i:04d}, name: DFU-{i:04d}, address: "F1:00:00:00:{i >> 8:02X}:{i & 0xFF:02X}", '
                    f'vars: {{ firmware: {os.path.basename(image)} }} }}\n')


def provision_supports_dfu(binary, work, image):
    """Whether `provision validate` accepts the dfu workflow (the step exists); (ok, its message)."""
    workflow, inventory = os.path.join(work, "dfu.yaml"), os.path.join(work, "dfu-line.yaml")
    dfu_workflow(workflow)
    dfu_inventory(inventory, 1, image)
    done = subprocess.run([binary, "validate", workflow, "--inventory", inventory], capture_output=True, text=True)
    return done.returncode == 0, (done.stdout + done.stderr).strip()


def run_provision(args, fleet, work, devices, image):
    workflow, inventory = os.path.join(work, "dfu.yaml"), os.path.join(work, "dfu-line.yaml")
    dfu_workflow(workflow)
    dfu_inventory(inventory, devices, image)
    report = os.path.join(work, "report.json")
    argv = [args.bin, "run", workflow, "--inventory", inventory, "--adapter", f"hci:tcp:127.0.0.1:{fleet.ports[0]}",
            "--concurrency", str(devices), "--slots", str(devices), "--quiet", "--report", report]
    with open(os.path.join(work, "provision.err"), "w") as err:
        status, wall, cpu, _ = run_measured(argv, args.timeout, stderr=err)
    result = {"exit": status, "wall_s": round(wall, 2), "cpu_s": round(cpu, 2)}
    try:
        with open(report) as f:
            document = json.load(f)
        result["ok"] = document["summary"]["outcomes"].get("succeeded", 0)
    except (OSError, ValueError, KeyError) as error:
        result.update(ok=0, error=f"no report ({error}); exit {status}")
    return result


def run_peer(args, fleet, work, devices, image, chunk):
    argv = [args.python, os.path.join(HERE, "smp_peer.py"), "--transport", f"tcp-client:127.0.0.1:{fleet.ports[1]}",
            "--devices", str(devices), "--image", image, "--chunk", chunk, "--timeout", "30"]
    with open(os.path.join(work, f"peer-{chunk}.err"), "w") as err:
        status, wall, cpu, output = run_measured(argv, args.timeout, stdout=subprocess.PIPE, stderr=err)
    result = {"exit": status, "wall_s": round(wall, 2), "cpu_s": round(cpu, 2)}
    try:
        line = json.loads([x for x in output.splitlines() if x.startswith("{")][-1])
        rates = sorted(r["upload_kBps"] * 1000 for r in line["results"] if "upload_kBps" in r)
        result.update(ok=line["updated"], upload_Bps_per_device=rates, failures=line["failures"][:3],
                      timeouts=sum(r.get("timeouts", 0) for r in line["results"]))
    except (IndexError, ValueError, KeyError, AttributeError) as error:
        result.update(ok=0, error=f"no result ({error}); exit {status}")
    return result


def device_side_rates(fleet, version):
    """Image bytes/s of each device's last upload of `version`, timed by the device (first chunk in to
    last chunk written), from the fixture's state files."""
    rates = []
    for name in sorted(os.listdir(fleet.state_dir)):
        if not name.endswith(".json"):
            continue
        with open(os.path.join(fleet.state_dir, name)) as f:
            history = json.load(f).get("history", [])
        started = [e for e in history if e.get("event") == "upload_started" and e.get("version") == version]
        done = [e for e in history if e.get("event") == "upload_completed"]
        if started and done and done[-1].get("seconds"):
            rates.append(done[-1]["len"] / done[-1]["seconds"])
    return sorted(rates)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--devices", default="1,16", help="device counts, one cell each (default 1,16)")
    parser.add_argument("--sides", default="provision,baseline")
    parser.add_argument("--chunk", default="mtu", help="the peer's chunking: mtu, buf or both (mtu,buf)")
    parser.add_argument("--latency", default="7.5ms")
    parser.add_argument("--link-rate", default="400kbit/s")
    parser.add_argument("--flash", default="100KB/s")
    parser.add_argument("--buf-size", type=int, default=2475)
    parser.add_argument("--buf-count", type=int, default=4)
    parser.add_argument("--mtu", type=int, default=498)
    parser.add_argument("--boot-time", default="1s")
    parser.add_argument("--image-kib", type=int, default=IMAGE_SIZE // 1024, help="image size (default 256 KiB)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds one side of one cell may take")
    parser.add_argument("--bin", default=os.path.join(ROOT, ".build/release/provision"))
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--fleet-arg", action="append", default=[], help="an extra bumble_fleet.py argument")
    parser.add_argument("--keep", action="store_true", help="keep each cell's directory")
    args = parser.parse_args()
    from bumble_fleet import parse_duration
    args.latency_s = parse_duration(args.latency)
    args.link_rate_bps = parse_rate(args.link_rate, "bits")
    args.flash_rate = parse_rate(args.flash, "bytes")
    sides = [s.strip() for s in args.sides.split(",") if s.strip()]
    chunks = [c.strip() for c in args.chunk.split(",") if c.strip()]

    b = bounds(args)
    print(f"# DFU bench {datetime.datetime.now().isoformat(timespec='seconds')} on {platform.node()} "
          f"({os.cpu_count()} cores, load {os.getloadavg()[0]:.1f} {os.getloadavg()[1]:.1f} {os.getloadavg()[2]:.1f})")
    print(f"# {args.latency} each way, {args.link_rate} per link, {args.image_kib} KiB image, flash {args.flash}, "
          f"{args.buf_count} buffers of {args.buf_size} with reassembly, MTU {args.mtu}")
    print(f"# bound per device (image bytes/s): link {b['link'] / 1000:.1f} KB/s, controller (27-byte LE ACL PDUs) "
          f"{b['controller_1M'] / 1000:.1f} KB/s at 1M / {b['controller_2M'] / 1000:.1f} KB/s at 2M, "
          f"device (flash {args.flash} + the answer's crossing, per buffer-sized request) {b['device'] / 1000:.1f} KB/s")
    for phy in ("1M", "2M"):
        value, setter = bound_for(b, phy)
        print(f"#   on {phy}: {value / 1000:.1f} KB/s, set by the {setter}")
    acl = StationController.le_acl_data_packet_length
    print(f"# N devices: N times that here (each fixture link has its own air). One real radio shared by all "
          f"links would carry at most {acl / pdu_airtime(acl, PHY_2M) / 1000:.0f} KB/s of {acl}-byte PDUs on 2M "
          f"({251 / pdu_airtime(251, PHY_2M) / 1000:.0f} KB/s with 251-byte ones)")
    for chunk in chunks:
        request = args.mtu - 3 if chunk == "mtu" else args.buf_size
        print(f"# one request at a time ({chunk}: {request}-byte requests, 1M): its cycle allows "
              f"{one_at_a_time_ceiling(args, request, PHY_1M) / 1000:.1f} KB/s")

    results = []
    for devices in [int(x) for x in args.devices.split(",") if x.strip()]:
        work = tempfile.mkdtemp(prefix="bench-dfu-")
        image = os.path.join(work, "app-2.0.0.bin")
        make_image(image, "2.0.0", size=args.image_kib * 1024)
        fleet = Fleet(args.python, work, 0, "100ms", args.latency, args.seed, fleet_args(args, devices))
        cell = {"devices": devices}
        try:
            if "provision" in sides:
                ok, message = provision_supports_dfu(args.bin, work, image) if os.path.exists(args.bin) else \
                    (False, f"no binary at {args.bin}")
                if ok:
                    before = fleet.cpu()
                    cell["provision"] = run_provision(args, fleet, work, devices, image)
                    cell["provision"]["fleet_cpu_s"] = round(fleet.cpu() - before, 2)
                    cell["provision"]["upload_Bps_per_device"] = device_side_rates(fleet, "2.0.0")
                else:
                    cell["provision"] = {"skipped": f"provision has no dfu step yet: {message.splitlines()[:1]}"}
            if "baseline" in sides:
                for n, chunk in enumerate(chunks):
                    twin = os.path.join(work, f"app-2.0.{n + 1}.bin")
                    make_image(twin, f"2.0.{n + 1}", size=args.image_kib * 1024)
                    before = fleet.cpu()
                    result = run_peer(args, fleet, work, devices, twin, chunk)
                    result["fleet_cpu_s"] = round(fleet.cpu() - before, 2)
                    result["peer_upload_Bps_per_device"] = result.pop("upload_Bps_per_device", [])
                    result["upload_Bps_per_device"] = device_side_rates(fleet, f"2.0.{n + 1}")
                    cell[f"baseline_{chunk}"] = result
        finally:
            fleet.stop()
            if not args.keep:
                shutil.rmtree(work, ignore_errors=True)
            else:
                cell["work"] = work
        results.append(cell)
        print(json.dumps(cell), flush=True)
        for side, r in cell.items():
            if isinstance(r, dict) and r.get("fleet_cpu_s") and r.get("upload_Bps_per_device"):
                kb = len(r["upload_Bps_per_device"]) * args.image_kib * 1.024
                print(f"# {devices} devices, {side}: fixture CPU {r['fleet_cpu_s'] / kb * 1000:.2f} ms per KB uploaded; "
                      f"a whole core would carry {kb / r['fleet_cpu_s']:.0f} KB/s in all", flush=True)

    print("\n| devices | side | updated | upload KB/s per device (median) | of bound | sum KB/s | of N × bound | "
          "bound per device | set by | wall s | fleet CPU s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for cell in results:
        n = cell["devices"]
        for side, r in cell.items():
            if side in ("devices", "work"):
                continue
            if "skipped" in r:
                print(f"| {n} | {side} | skipped: {r['skipped']} | | | | | | | | |")
                continue
            phy = "2M" if side == "provision" else "1M"
            bound, setter = bound_for(b, phy)
            rates = r.get("upload_Bps_per_device", [])
            median = rates[len(rates) // 2] if rates else 0
            print(f"| {n} | {side} | {r.get('ok', 0)}/{n} | {median / 1000:.1f} | {median / bound:.2f} | "
                  f"{sum(rates) / 1000:.1f} | {sum(rates) / (n * bound):.2f} | {bound / 1000:.1f} ({phy}) | {setter} | "
                  f"{r.get('wall_s')} | "
                  f"{r.get('fleet_cpu_s')} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
