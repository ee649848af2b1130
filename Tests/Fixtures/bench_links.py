#!/usr/bin/env python3
"""What link settings and several controllers do to throughput: `provision run` (release build) over
hci:tcp against paced Bumble fleets.

    swift build -c release --product provision
    Tests/Fixtures/bench_links.py link         # one station: data length × PHY × connection interval
    Tests/Fixtures/bench_links.py stations     # 1, 2 and 4 station controllers, aggregate devices/min

`link`: every cell starts a fleet paced by connection events (bumble_fleet.py --pace-by-interval: each LL
PDU waits for its link's next event, an event carries what fits before the next) and provisions
`--devices` units with a `--blob-size` blob (workflows/sensor-v2.yaml with the `connect` step asking for
the cell's `interval`, `phy` and `data_length`; 27 octets and LE 1M are the adapter's `data-length=off`
and `phy=1m`). Per cell: the blob's throughput per device (blob bytes / `stream blob` step time, median),
the whole provisioning per device (median), devices per minute, and what the report says each link got.

`stations`: every cell starts a fleet with K station controllers (--stations K) hearing the same devices
(advertising every `--adv`, link delay `--latency` each way) and runs one `provision run` with K
`--adapter` options, 8 links each (--concurrency 8K). Per cell: devices per minute, the share of devices
each adapter provisioned, and the fleet's CPU per device (the fleet is one Python process emulating
every radio: when its CPU time nears the wall time the fleet, not the station, is the ceiling).

At the end a Markdown table of every cell (--markdown FILE to keep it).
"""

import argparse
import collections
import datetime
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
from bench_hci_vs_bumble import Fleet, run_measured, write_line  # noqa: E402


def workflow(work, connect):
    """workflows/sensor-v2.yaml with `connect` options added."""
    with open(os.path.join(ROOT, "workflows/sensor-v2.yaml")) as f:
        text = f.read()
    old = "  - connect: { mtu: 247, timeout: 10s }"
    assert old in text, "workflows/sensor-v2.yaml changed its connect step"
    path = os.path.join(work, "workflow.yaml")
    with open(path, "w") as f:
        f.write(text.replace(old, "  - connect: { mtu: 247, timeout: 10s" + (", " + connect if connect else "") + " }"))
    return path


def provision(args, work, flow, adapters, concurrency):
    report = os.path.join(work, "report.json")
    argv = [args.bin, "run", flow, "--inventory", os.path.join(work, "line.yaml"), "--concurrency", str(concurrency),
            "--quiet", "--report", report]
    for a in adapters:
        argv += ["--adapter", a]
    with open(os.path.join(work, "provision.err"), "w") as err:
        status, wall, cpu, _ = run_measured(argv, args.timeout, stderr=err)
    with open(report) as f:
        return status, wall, cpu, json.load(f)


def step_ms(device, name):
    for s in device.get("steps", []):
        if s["name"] == name:
            return s["duration_ms"]
    return None


def link_cells(args):
    cells = []
    for interval in args.intervals:
        for phy in args.phys:
            for length in args.data_lengths:
                cells.append((interval, phy, length))
    rows = []
    for interval, phy, length in cells:
        work = tempfile.mkdtemp(prefix="bench-link-")
        write_line(work, args.devices, args.blob_size)
        settings = [f"interval: {interval}"] + ([f"phy: {phy}"] if phy != "1M" else []) + \
                   ([f"data_length: {length}"] if length != 27 else [])
        options = [] if phy != "1M" else ["phy=1m"]
        options += [] if length != 27 else ["data-length=off"]
        fleet = Fleet(args.python, work, args.devices, args.adv, "0", args.seed,
                      ["--stations", "1", "--pace-by-interval", "--acl-buffers", args.acl_buffers])
        try:
            spec = ",".join([f"hci:tcp:127.0.0.1:{fleet.ports[0]}"] + options)
            before = fleet.cpu()
            status, wall, cpu, report = provision(args, work, workflow(work, ", ".join(settings)), [spec], args.concurrency)
            fleet_cpu = fleet.cpu() - before
        finally:
            fleet.stop()
        devices = [d for d in report["devices"] if d["outcome"] == "succeeded"]
        blob = [args.blob_size / (step_ms(d, "stream blob") / 1000) / 1000 for d in devices if step_ms(d, "stream blob")]
        links = collections.Counter(
            f"{d['link']['phy']} {d['link']['data_length']} B {d['link']['interval_ms']} ms" for d in devices if d.get("link"))
        row = {"interval": interval, "phy": phy, "data_length": length, "acl": args.acl_buffers, "ok": len(devices), "devices": args.devices,
               "blob_kB_s": statistics.median(blob) if blob else 0.0,
               "device_ms": statistics.median(d["duration_ms"] for d in devices) if devices else 0.0,
               "dpm": report["summary"]["devices_per_minute"], "links": dict(links), "exit": status,
               "fleet_cpu_s": fleet_cpu, "provision_cpu_s": cpu, "wall_s": wall}
        rows.append(row)
        print(f"interval {interval:>6}  {phy:>2}  {length:>3} B  {row['ok']}/{args.devices}  blob {row['blob_kB_s']:.1f} kB/s  "
              f"device {row['device_ms']:.0f} ms  {row['dpm']:.1f} devices/min  links {row['links']}", flush=True)
        shutil.rmtree(work, ignore_errors=True)
    table = ["| controller ACL buffers | interval | PHY | data length | blob throughput per link (median) | provisioning per device (median) | devices/min | what the report says the links got |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        table.append(f"| {r['acl']} | {r['interval']} | {r['phy']} | {r['data_length']} B | {r['blob_kB_s']:.1f} kB/s | {r['device_ms']:.0f} ms | "
                     f"{r['dpm']:.1f} ({r['ok']}/{r['devices']}) | {', '.join(f'{k}: {v}' for k, v in r['links'].items())} |")
    return rows, table


def separate_fleets(args, work, k):
    """K fleet processes, one station each, the devices dealt out among them (device i to fleet i mod K):
    each controller hears its own share, and no one Python process emulates every radio."""
    sys.path.insert(0, HERE)
    from bumble_fleet import default_devices
    devices = default_devices(args.devices)
    fleets = []
    for f in range(k):
        sub = os.path.join(work, f"fleet{f}")
        os.makedirs(sub)
        config = os.path.join(sub, "fleet.json")
        with open(config, "w") as out:
            json.dump({"devices": devices[f::k]}, out)
        fleets.append(Fleet(args.python, sub, 0, args.adv, args.latency, args.seed, ["--stations", "1", "--config", config]))
    return fleets


def station_cells(args):
    rows = []
    for k in args.stations:
        work = tempfile.mkdtemp(prefix="bench-stations-")
        # Controllers that each hear only their own devices: an inventory without addresses, so that each
        # device is found by scanning and goes to the controller that heard it (connecting by address
        # would send it to whichever controller has a free slot).
        write_line(work, args.devices, args.blob_size, by_name=args.separate)
        if args.separate:
            fleets = separate_fleets(args, work, k)
        else:
            # The last --stations wins over the one bench_hci_vs_bumble's Fleet gives.
            fleets = [Fleet(args.python, work, args.devices, args.adv, args.latency, args.seed, ["--stations", str(k)])]
        try:
            adapters = [f"hci:tcp:127.0.0.1:{p}" for f in fleets for p in f.ports]
            before = sum(f.cpu() for f in fleets)
            status, wall, cpu, report = provision(args, work, workflow(work, ""), adapters, 8 * k)
            fleet_cpu = sum(f.cpu() for f in fleets) - before
        finally:
            for f in fleets:
                f.stop()
        share = collections.Counter(d.get("adapter") for d in report["devices"] if d["outcome"] == "succeeded")
        ok = sum(share.values())
        row = {"stations": k, "ok": ok, "devices": args.devices, "dpm": report["summary"]["devices_per_minute"],
               "share": [share.get(a, 0) for a in adapters], "peak_links": [a.get("peak_links") for a in report["run"]["adapters"]],
               "fleet_cpu_ms": fleet_cpu / args.devices * 1000, "wall_ms": wall / args.devices * 1000, "exit": status,
               "provision_cpu_ms": cpu / args.devices * 1000}
        rows.append(row)
        print(f"{k} station(s)  {ok}/{args.devices}  {row['dpm']:.1f} devices/min  per adapter {row['share']}  peak links "
              f"{row['peak_links']}  CPU per device: fleet {row['fleet_cpu_ms']:.0f} ms, provision {row['provision_cpu_ms']:.0f} ms, "
              f"of {row['wall_ms']:.0f} ms wall", flush=True)
        shutil.rmtree(work, ignore_errors=True)
    base = rows[0]["dpm"] / rows[0]["stations"] if rows and rows[0]["dpm"] else 0
    table = ["| controllers | devices/min | × one controller | devices per controller | most links held at once | CPU per device: fleet / provision / wall |",
             "|---|---|---|---|---|---|"]
    for r in rows:
        table.append(f"| {r['stations']} | {r['dpm']:.1f} ({r['ok']}/{r['devices']}) | {r['dpm'] / base if base else 0:.2f} | "
                     f"{' / '.join(map(str, r['share']))} | {' / '.join(map(str, r['peak_links']))} | "
                     f"{r['fleet_cpu_ms']:.0f} / {r['provision_cpu_ms']:.0f} / {r['wall_ms']:.0f} ms |")
    return rows, table


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("mode", choices=["link", "stations"])
    parser.add_argument("--devices", type=int, default=None, help="devices per cell (link: 8, stations: 64)")
    parser.add_argument("--blob-size", type=int, default=None, help="blob bytes (link: 32768, stations: 2048)")
    parser.add_argument("--adv", default=None, help="advertising interval (link: 20ms, stations: 100ms)")
    parser.add_argument("--latency", default="7.5ms", help="stations: link delay each way")
    parser.add_argument("--intervals", default="7.5ms,30ms", help="link: connection intervals")
    parser.add_argument("--phys", default="1M,2M", help="link: PHYs")
    parser.add_argument("--data-lengths", default="27,251", help="link: LL payload sizes")
    parser.add_argument("--stations", default="1,2,4", help="stations: controller counts")
    parser.add_argument("--separate", action="store_true",
                        help="stations: one fleet process per controller, the devices dealt out among them and found by "
                             "name (else one fleet whose controllers all hear every device, inventory with addresses)")
    parser.add_argument("--concurrency", type=int, default=1, help="link: devices at once (the fleet gives every link the air to itself)")
    parser.add_argument("--acl-buffers", default="27x64", help="link: the station controller's LE ACL buffers, LENxCOUNT")
    parser.add_argument("--bin", default=os.path.join(ROOT, ".build/release/provision"))
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=1800)
    parser.add_argument("--markdown", help="also write the table to this file")
    args = parser.parse_args()
    link = args.mode == "link"
    args.devices = args.devices or (4 if link else 64)
    args.blob_size = args.blob_size or (32768 if link else 2048)
    args.adv = args.adv or ("20ms" if link else "100ms")
    args.intervals = [x.strip() for x in args.intervals.split(",") if x.strip()]
    args.phys = [x.strip() for x in args.phys.split(",") if x.strip()]
    args.data_lengths = [int(x) for x in args.data_lengths.split(",") if x.strip()]
    args.stations = [int(x) for x in args.stations.split(",") if x.strip()]
    if not os.access(args.bin, os.X_OK):
        sys.exit(f"{args.bin} is not built: swift build -c release --product provision")
    rows, table = link_cells(args) if link else station_cells(args)
    header = (f"{datetime.date.today()}, {platform.node()}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}: "
              f"`Tests/Fixtures/bench_links.py {' '.join(sys.argv[1:])}`")
    print("\n" + header + "\n\n" + "\n".join(table))
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(header + "\n\n" + "\n".join(table) + "\n")


if __name__ == "__main__":
    main()
