#!/usr/bin/env python3
"""ESP32 Wi-Fi provisioning on the Bumble ESP fixture: `provision run` beside the esp_prov-like peer
(esp_peer.py), on the issue's line: 32 units at concurrency 16, 7.5 ms link latency each way.

    swift build -c release --product provision
    .venv/bin/python3 Tests/Fixtures/bench_esp.py [--units 32] [--concurrency 16] [--join-time 500ms]

One fleet (bumble_fleet.py --stations 2 --esp-devices 1+2×units): provision goes through station 1, the
peer through station 2, each on units of its own.

THE BOUND of provision's makespan: the controller makes one connection at a time, so the units' connects
are serialised; the last unit then still needs one unit's session, set/apply and status. Both are
measured, not assumed: a run of provision on one unit alone (ESP-0001) gives its connect step's time and
its wifi_provision step's time (session, set, apply, join, status); bound = units × connect + provision.
With fewer slots than units (32 on 16) a unit also waits for a slot to free: the output prints that
bound too (each unit starts once the controller is free and the unit `concurrency` before it ended).
The makespan is provision's whole process (start, validation, journal, report included).
The output prints provision's makespan against it, and both sides' makespan and CPU seconds per unit
(each process's own rusage; the fixture's CPU is printed apart: one Python process emulating every radio
and unit, shared by both sides).
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from bench_hci_vs_bumble import ROOT, Fleet, machine, run_measured  # noqa: E402

WORKFLOW = """name: esp-bench
defaults: { timeout: 30s }
steps:
  - connect: { mtu: 247, timeout: 60s }
  - wifi_provision: { ssid: "${ssid}", passphrase: "${wifi_passphrase}", security: 2, username: wifiprov, pop: "${pop}", timeout: 45s }
  - disconnect: {}
"""


def inventory(path, first, count):
    with open(path, "w") as f:
        f.write("secrets: [pop, wifi_passphrase]\n")
        f.write('defaults:\n  vars: { ssid: line-5-iot, wifi_passphrase: "demo-line-5-passphrase" }\ndevices:\n')
        for i in range(first, first + count):
            f.write(f'  - {{ id: ESP-{i:04d}, name: PROV_{i:04d}, address: "E5:00:00:00:{i >> 8:02X}:{i & 0xFF:02X}", '
                    f'vars: {{ pop: "pop-ESP-{i:04d}" }} }}\n')


def run_provision(args, fleet, work, name, first, count):
    inv = os.path.join(work, f"{name}.yaml")
    inventory(inv, first, count)
    report = os.path.join(work, f"{name}.json")
    argv = [args.bin, "run", os.path.join(work, "esp.yaml"), "--inventory", inv, "--adapter", f"hci:tcp:127.0.0.1:{fleet.ports[0]}",
            "--concurrency", str(args.concurrency), "--slots", str(args.concurrency), "--quiet", "--report", report]
    with open(os.path.join(work, f"{name}.err"), "w") as err:
        status, wall, cpu, _ = run_measured(argv, args.timeout, stderr=err)
    with open(report) as f:
        r = json.load(f)
    steps = {}
    for d in r["devices"]:
        for s in d.get("steps", []):
            steps.setdefault(s["name"].split(" ")[0], []).append(s.get("duration_ms", 0))
    return {"exit": status, "wall_s": wall, "cpu_s": cpu, "succeeded": r["summary"]["outcomes"]["succeeded"],
            "makespan_s": r["summary"].get("duration_s") or r["run"].get("duration_s") or wall, "steps_ms": steps}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--units", type=int, default=32)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--join-time", default="500ms")
    parser.add_argument("--latency", default="7.5ms")
    parser.add_argument("--bin", default=os.path.join(ROOT, ".build/release/provision"))
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--timeout", type=float, default=600)
    args = parser.parse_args()

    work = tempfile.mkdtemp(prefix="bench-esp-")
    with open(os.path.join(work, "esp.yaml"), "w") as f:
        f.write(WORKFLOW)
    total = 1 + 2 * args.units
    fleet = Fleet(args.python, work, 0, "20ms", args.latency, 1, ["--esp-devices", str(total), "--esp-join-time", args.join_time])
    try:
        one = run_provision(args, fleet, work, "one", 1, 1)
        before = fleet.cpu()
        line = run_provision(args, fleet, work, "line", 2, args.units)
        line["fleet_cpu_s"] = fleet.cpu() - before
        before = fleet.cpu()
        argv = [args.python, os.path.join(HERE, "esp_peer.py"), "--transport", f"tcp-client:127.0.0.1:{fleet.ports[1]}",
                "--devices", str(args.units), "--first", str(2 + args.units), "--concurrency", str(args.concurrency)]
        with open(os.path.join(work, "peer.err"), "w") as err:
            status, wall, cpu, output = run_measured(argv, args.timeout, stdout=subprocess.PIPE, stderr=err)
        peer = json.loads([x for x in output.splitlines() if x.startswith("{")][-1])
        peer.update(exit=status, wall_s=wall, cpu_s=cpu, fleet_cpu_s=fleet.cpu() - before)
    finally:
        fleet.stop()

    connect_ms = one["steps_ms"]["connect"][0]
    provision_ms = one["steps_ms"]["wifi_provision"][0]
    bound_s = (args.units * connect_ms + provision_ms) / 1000
    # With fewer slots than units a unit also waits for a slot: unit i starts when the controller is free
    # (i connects before it) and when unit i - concurrency has ended.
    ends = []
    for i in range(args.units):
        start = max(i * connect_ms, ends[i - args.concurrency] if i >= args.concurrency else 0)
        ends.append(start + connect_ms + provision_ms)
    slot_bound_s = max(ends) / 1000
    makespan = line["wall_s"]
    print(f"machine: {machine()}")
    print(f"line: {args.units} units, concurrency {args.concurrency}, link latency {args.latency} each way, join {args.join_time}")
    print(f"one unit alone: connect {connect_ms:.0f} ms, wifi_provision {provision_ms:.0f} ms "
          f"→ bound {args.units} × {connect_ms:.0f} + {provision_ms:.0f} = {bound_s:.2f} s")
    print(f"with {args.concurrency} slots for {args.units} units (a unit waits for a slot too): bound {slot_bound_s:.2f} s")
    print(f"provision: {line['succeeded']}/{args.units} joined, makespan {makespan:.2f} s "
          f"({makespan / bound_s:.2f} × bound, {makespan / slot_bound_s:.2f} × the slot bound), CPU {line['cpu_s'] / args.units * 1000:.1f} ms/unit; "
          f"fixture CPU {line['fleet_cpu_s']:.1f} s")
    print(f"esp_prov-like peer: {peer['joined']}/{args.units} joined, makespan {peer['wall_s']:.2f} s, "
          f"CPU {peer['cpu_s'] / args.units * 1000:.1f} ms/unit; fixture CPU {peer['fleet_cpu_s']:.1f} s; "
          f"failures {peer['failures'][:3]}")
    print(f"work: {work}")
    return 0 if line["succeeded"] == args.units and peer["joined"] == args.units else 1


if __name__ == "__main__":
    sys.exit(main())
