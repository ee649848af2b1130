#!/usr/bin/env python3
"""`provision run` over hci:tcp (our HCI host, release build) against the Bumble-Python baseline
(baseline_provision.py: connects by address, full discovery), on paced Bumble fleets, in one run.

    swift build -c release --product provision
    Tests/Fixtures/bench_hci_vs_bumble.sh                       # 48 devices, the whole matrix (18 cells)
    Tests/Fixtures/bench_hci_vs_bumble.sh --quick               # 4 cells: 100 ms and 1 s × 7.5 and 25 ms, c=16
    Tests/Fixtures/bench_hci_vs_bumble.sh --adv 1s --latency 25ms --concurrency 16 --devices 48

The matrix: advertising interval (--adv, default 100ms,1s) × link latency each way (--latency, default
0,7.5ms,25ms) × concurrency (--concurrency, default 1,4,16). Every cell starts a fresh fleet
(bumble_fleet.py --stations 2 --devices N --adv-interval A --link-latency L), runs `provision run
workflows/sensor-v2.yaml --concurrency C --slots C` through station 1, then the baseline with the same
concurrency through station 2 (the devices were provisioned once already; the reference device accepts
a second provisioning), and stops the fleet.

Per cell it prints, for each side: devices succeeded / total, devices per minute, and CPU time per
device of the side's process (whole process, from its rusage) and of the fleet process while that side
ran (the fleet is one Python process emulating every radio and peripheral: when its CPU per device
approaches the wall time per device, the fleet, not the host, is the ceiling). For provision also the
ATT round trips per device from its report. At the end: a Markdown table of every cell.
"""

import argparse
import datetime
import json
import os
import platform
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
TICKS = os.sysconf("SC_CLK_TCK")


def parse_list(text, kind=str):
    return [kind(x.strip()) for x in text.split(",") if x.strip()]


def seconds_of(latency):
    """The upper end, in seconds, of a link latency as bumble_fleet.py reads it (`0`, `7.5ms`, `7.5ms-25ms`)."""
    sys.path.insert(0, HERE)
    from bumble_fleet import parse_latency
    return parse_latency(latency)[1]


def process_cpu(pid):
    """User + system CPU seconds of a running process (Linux /proc)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def run_measured(argv, timeout, stdout=subprocess.DEVNULL, stderr=None):
    """Runs `argv` to its end (killed after `timeout` seconds); returns (exit status, wall seconds,
    CPU seconds from its rusage, stdout text or None)."""
    started = time.monotonic()
    process = subprocess.Popen(argv, stdout=stdout, stderr=stderr, cwd=ROOT)
    timer = threading.Timer(timeout, process.kill)
    timer.start()
    output = process.stdout.read().decode() if stdout == subprocess.PIPE else None
    _, status, usage = os.wait4(process.pid, 0)
    timer.cancel()
    process.returncode = os.waitstatus_to_exitcode(status)
    return process.returncode, time.monotonic() - started, usage.ru_utime + usage.ru_stime, output


class Fleet:
    """One bumble_fleet.py process for one cell."""

    def __init__(self, python, work, devices, adv, latency, seed, extra):
        self.state_dir = os.path.join(work, "state")
        self.stderr = open(os.path.join(work, "fleet.err"), "w")
        argv = [python, os.path.join(HERE, "bumble_fleet.py"), "--port", "0", "--stations", "2",
                "--devices", str(devices), "--adv-interval", adv, "--seed", str(seed),
                "--state-dir", self.state_dir, "--exit-on-stdin-eof"] + extra
        if seconds_of(latency) > 0:
            argv += ["--link-latency", latency]
        self.process = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr)
        ready, _, _ = select.select([self.process.stdout], [], [], 60)
        line = self.process.stdout.readline() if ready else b""
        if not line:
            self.stop()
            raise RuntimeError(f"the fleet did not start; see {self.stderr.name}")
        self.ready = json.loads(line)
        self.ports = self.ready["ports"]

    def cpu(self):
        return process_cpu(self.process.pid)

    def provisioned(self):
        """Devices whose own state says provisioned (state 02)."""
        count = 0
        for name in os.listdir(self.state_dir):
            if name.endswith(".json"):
                with open(os.path.join(self.state_dir, name)) as f:
                    count += json.load(f).get("state") == 2
        return count

    def stop(self):
        if self.process.poll() is None:
            self.process.stdin.close()  # --exit-on-stdin-eof
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.send_signal(signal.SIGKILL)
                self.process.wait()
        self.stderr.close()


def write_line(path, devices, blob_size, by_name=False):
    """The inventory: every device with its id, name and address (or, `by_name`, without the address, so
    that provision finds it by scanning for its name)."""
    with open(os.path.join(path, "blob.bin"), "wb") as f:
        f.write(bytes((i * 131 + 17) & 0xFF for i in range(blob_size)))
    with open(os.path.join(path, "line.yaml"), "w") as f:
        f.write("devices:\n")
        for i in range(1, devices + 1):
            address = "" if by_name else f'address: "F0:00:00:00:{i >> 8:02X}:{i & 0xFF:02X}", '
            f.write(f'  - {{ id: SN-{i:04d}, name: SNS-{i:04d}, {address}'
                    f'vars: {{ config: "0a0b0c{i & 0xFF:02x}", blob: blob.bin }} }}\n')


def run_provision(args, fleet, work, concurrency):
    report = os.path.join(work, f"report-c{concurrency}.json")
    argv = [args.bin, "run", args.workflow, "--inventory", os.path.join(work, "line.yaml"),
            "--adapter", f"hci:tcp:127.0.0.1:{fleet.ports[0]}", "--concurrency", str(concurrency),
            "--slots", str(concurrency), "--quiet", "--report", report]
    with open(os.path.join(work, "provision.err"), "w") as err:
        status, wall, cpu, _ = run_measured(argv, args.timeout, stderr=err)
    result = {"exit": status, "wall_s": wall, "cpu_s": cpu}
    try:
        with open(report) as f:
            summary = json.load(f)["summary"]
        result.update(ok=summary["outcomes"]["succeeded"], dpm=summary["devices_per_minute"],
                      rt=summary.get("att_round_trips_per_device"),
                      outcomes={k: v for k, v in summary["outcomes"].items() if v})
    except (OSError, ValueError, KeyError) as error:
        result.update(ok=0, dpm=0.0, rt=None, error=f"no report ({error}); exit {status}")
    return result


def run_baseline(args, fleet, work, concurrency):
    argv = [args.python, os.path.join(HERE, "baseline_provision.py"), "--transport",
            f"tcp-client:127.0.0.1:{fleet.ports[1]}", "--devices", str(args.devices),
            "--concurrency", str(concurrency), "--blob-size", str(args.blob_size)]
    with open(os.path.join(work, "baseline.err"), "w") as err:
        status, wall, cpu, output = run_measured(argv, args.timeout, stdout=subprocess.PIPE, stderr=err)
    result = {"exit": status, "wall_s": wall, "cpu_s": cpu}
    try:
        line = json.loads([x for x in output.splitlines() if x.startswith("{")][-1])
        result.update(ok=line["provisioned"], dpm=line["devices_per_minute"] or 0.0,
                      failures=line["failures"][:3])
    except (IndexError, ValueError, KeyError, AttributeError) as error:
        result.update(ok=0, dpm=0.0, error=f"no result ({error}); exit {status}")
    return result


def run_cell(args, adv, latency, concurrency):
    work = tempfile.mkdtemp(prefix="bench-cell-")
    write_line(work, args.devices, args.blob_size, args.by_name)
    fleet = Fleet(args.python, work, args.devices, adv, latency, args.seed, args.fleet_arg)
    cell = {"adv": adv, "latency": latency, "concurrency": concurrency, "devices": args.devices}
    try:
        for side, run in (("provision", run_provision), ("baseline", run_baseline)):
            if side not in args.sides:
                continue
            before = fleet.cpu()
            result = run(args, fleet, work, concurrency)
            result["fleet_cpu_s"] = fleet.cpu() - before
            if side == "provision":
                result["device_side_provisioned"] = fleet.provisioned()
            cell[side] = result
    finally:
        fleet.stop()
    if args.keep:
        cell["work"] = work
    else:
        shutil.rmtree(work, ignore_errors=True)
    return cell


def per_device_ms(seconds, devices):
    return seconds / devices * 1000


def describe(cell, side):
    r = cell.get(side)
    if r is None:
        return f"{side}: not run"
    n = cell["devices"]
    text = (f"{side} {r['ok']}/{n}  {r['dpm']:.1f} devices/min  CPU {per_device_ms(r['cpu_s'], n):.1f} ms/device  "
            f"fleet CPU {per_device_ms(r['fleet_cpu_s'], n):.1f} ms/device  wall {r['wall_s']:.1f} s")
    if side == "provision":
        text += f"  ATT round trips/device {r.get('rt')}  device side: {r.get('device_side_provisioned')} provisioned"
        if r.get("outcomes"):
            text += f"  outcomes {r['outcomes']}"
    if r.get("failures"):
        text += f"  first failures {r['failures']}"
    if r.get("error"):
        text += f"  ERROR {r['error']}"
    return text


def table(cells):
    head = ("| advertising | latency each way | concurrency | provision ok | baseline ok | provision devices/min | "
            "baseline devices/min | ratio | ATT round trips/device | CPU ms/device provision | "
            "CPU ms/device baseline | fleet CPU ms/device (provision run) | fleet CPU ms/device (baseline run) |")
    rows = [head, "|" + "---|" * 13]
    for c in cells:
        n = c["devices"]
        p, b = c.get("provision"), c.get("baseline")

        def f(r, key, fmt="{:.1f}"):
            return fmt.format(r[key]) if r and r.get(key) is not None else "–"

        def ms(r, key):
            return f"{per_device_ms(r[key], n):.1f}" if r else "–"

        def ok(r):
            return f"{r['ok']}/{n}" if r else "–"

        ratio = f"{p['dpm'] / b['dpm']:.2f}" if p and b and b["dpm"] else "–"
        rows.append(f"| {c['adv']} | {c['latency']} | {c['concurrency']} | {ok(p)} | {ok(b)} | "
                    f"{f(p, 'dpm')} | {f(b, 'dpm')} | {ratio} | {f(p, 'rt', '{}')} | {ms(p, 'cpu_s')} | "
                    f"{ms(b, 'cpu_s')} | {ms(p, 'fleet_cpu_s')} | {ms(b, 'fleet_cpu_s')} |")
    return "\n".join(rows)


def machine():
    model = "?"
    try:
        with open("/proc/cpuinfo") as f:
            model = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    try:
        import bumble
        bumble_version = getattr(bumble, "__version__", "?")
    except ImportError:
        bumble_version = "not importable"
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    return (f"{datetime.datetime.now().isoformat(timespec='seconds')}, {os.cpu_count()} CPUs ({model}), "
            f"Python {platform.python_version()}, bumble {bumble_version}, load average {load}")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("devices_positional", nargs="?", type=int, metavar="DEVICES",
                        help="devices (same as --devices)")
    parser.add_argument("--devices", type=int, default=48)
    parser.add_argument("--adv", default="100ms,1s", help="advertising intervals, comma-separated")
    parser.add_argument("--latency", default="0,7.5ms,25ms", help="link latencies each way, comma-separated "
                        "(a range such as 7.5ms-25ms is one value)")
    parser.add_argument("--concurrency", default="1,4,16", help="concurrencies (provision gets --slots the same)")
    parser.add_argument("--quick", action="store_true",
                        help="adv 100ms,1s × latency 7.5ms,25ms × concurrency 16, the cells issue #8 names (options given "
                             "explicitly still win)")
    parser.add_argument("--sides", default="provision,baseline", help="which sides to run")
    parser.add_argument("--bin", default=os.path.join(ROOT, ".build/release/provision"))
    parser.add_argument("--workflow", default=os.path.join(ROOT, "workflows/sensor-v2.yaml"))
    parser.add_argument("--python", default=sys.executable, help="the Python with Bumble (fleet and baseline)")
    parser.add_argument("--blob-size", type=int, default=2048)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--by-name", action="store_true",
                        help="the inventory gives names only: provision finds every device by scanning (the baseline "
                             "still connects by address); with --fleet-arg=--no-scan-while-initiating this measures "
                             "the scan paused around each connection")
    parser.add_argument("--fleet-arg", action="append", default=[],
                        help="an extra bumble_fleet.py argument for every cell, e.g. --fleet-arg=--quirk=uuid128")
    parser.add_argument("--timeout", type=float, default=1800, help="seconds one side of one cell may take")
    parser.add_argument("--markdown", help="also write the table to this file")
    parser.add_argument("--json", help="write every measurement to this file")
    parser.add_argument("--keep", action="store_true", help="keep each cell's directory (reports, logs)")
    args = parser.parse_args()
    if args.devices_positional:
        args.devices = args.devices_positional
    given = set(a.split("=")[0] for a in sys.argv[1:])
    if args.quick:
        if "--latency" not in given:
            args.latency = "7.5ms,25ms"
        if "--concurrency" not in given:
            args.concurrency = "16"
    args.sides = parse_list(args.sides)
    if not os.access(args.bin, os.X_OK):
        parser.error(f"{args.bin} is not there: swift build -c release --product provision")

    print(f"# {machine()}", flush=True)
    print(f"# {args.bin}, {args.devices} devices, blob {args.blob_size} bytes, seed {args.seed}, "
          f"fleet extra {args.fleet_arg or 'none'}, inventory {'names only' if args.by_name else 'with addresses'}",
          flush=True)
    cells = []
    for adv in parse_list(args.adv):
        for latency in parse_list(args.latency):
            for concurrency in parse_list(args.concurrency, int):
                cell = run_cell(args, adv, latency, concurrency)
                cells.append(cell)
                print(f"adv {adv}  latency {latency}  c={concurrency}", flush=True)
                for side in ("provision", "baseline"):
                    print("  " + describe(cell, side), flush=True)
    print(f"# done: {machine()}")
    print()
    text = table(cells)
    print(text)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(text + "\n")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(cells, f, indent=1)


if __name__ == "__main__":
    main()
