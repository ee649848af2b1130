#!/usr/bin/env python3
"""Measures the fleet's radio timing against its model (a measurement, not a test: it asserts nothing).

    Tests/Fixtures/check_timing.py [--adv 100ms,1s] [--latency 7.5ms,25ms] [--round-trips 20]

In one process: sensor-v2 devices and a station controller on a PacedLink (fleet_radio.py), driven by
Bumble's host. For each advertising interval A and link latency L it prints what was measured and what
the model says:
- advertising: the time between two advertising reports of one device: A + advDelay (0-10 ms);
- connect: LE Create Connection to LE Connection Complete, started at a random moment: the wait for
  the device's next advertising event, on average (A + 5 ms) / 2, at most A + 10 ms;
- round trips: N ATT Read Requests on a link: 2·N·(L + airtime of a short PDU);
- blob: 2048 bytes written without response in 244-byte chunks, then one write request, which goes out
  in the same connection event right behind them: 2·L + the airtime of blob and request and response,
  at 27 and 251 octets, 1M and 2M;
- disconnect: HCI Disconnect to Disconnection Complete: L (the peer acknowledges LL_TERMINATE_IND).
The event loop's own delays (timer resolution, the host's processing) come on top of the model.
"""

import argparse
import asyncio
import random
import statistics
import sys
import tempfile
import time

from bumble import hci
from bumble.core import UUID
from bumble.device import Device, Peer

import fleet_radio
from bumble_fleet import SensorV2, default_devices, parse_duration
from fleet_radio import LinkTiming, PacedLink, StationController


async def fleet(adv, latency, devices=1):
    link = PacedLink(LinkTiming((latency, latency), seed=11))
    state_dir = tempfile.mkdtemp(prefix="timing-")
    sensors = [SensorV2(spec, link, state_dir, seed=11, adv_interval=adv) for spec in default_devices(devices)]
    for s in sensors:
        await s.start()
    station = StationController("station", link=link, public_address="00:AA:00:00:00:01", seed=11)
    host = Device.with_hci("host", hci.Address("C0:00:00:00:00:01"), station, station)
    await host.power_on()
    return link, sensors, station, host


def ms(x):
    return f"{x * 1000:7.1f} ms"


async def advertising(adv):
    _, sensors, _, host = await fleet(adv, 0.0)
    seen = []
    host.on("advertisement", lambda a: seen.append(time.monotonic()))
    await host.start_scanning(filter_duplicates=False, active=False, scan_window=adv * 1000 + 20,
                              scan_interval=adv * 1000 + 20)
    while len(seen) < 21:
        await asyncio.sleep(adv)
    await host.stop_scanning()
    gaps = [b - a for a, b in zip(seen, seen[1:])][:20]
    print(f"  advertising: between reports mean {ms(statistics.mean(gaps))}, min {ms(min(gaps))}, "
          f"max {ms(max(gaps))}   model: {ms(adv)} to {ms(adv + 0.010)}, mean {ms(adv + 0.005)}")


async def connect(adv, latency, count):
    _, sensors, _, host = await fleet(adv, latency)
    address = hci.Address(sensors[0].address)
    rng = random.Random(3)
    waits = []
    for _ in range(count):
        await asyncio.sleep(rng.uniform(0, adv))
        started = time.monotonic()
        connection = await host.connect(address)
        waits.append(time.monotonic() - started)
        await connection.disconnect()
    print(f"  connect ({count}): mean {ms(statistics.mean(waits))}, max {ms(max(waits))}   "
          f"model: mean {ms((adv + 0.005) / 2)}, max {ms(adv + 0.010)}")


async def round_trips(adv, latency, count):
    _, sensors, station, host = await fleet(adv, latency)
    connection = await host.connect(hci.Address(sensors[0].address))
    peer = Peer(connection)
    await peer.discover_services()
    for s in peer.services:
        await s.discover_characteristics()
    serial = peer.get_characteristics_by_uuid(UUID("2A25"))[0]
    fff1 = peer.get_characteristics_by_uuid(UUID("FFF1"))[0]
    fff4 = peer.get_characteristics_by_uuid(UUID("FFF4"))[0]
    link = station.find_le_connection_by_handle(connection.handle)
    started = time.monotonic()
    for _ in range(count):
        await peer.read_value(serial)
    took = time.monotonic() - started
    # Read Request: 4 + 3 bytes; Read Response: 4 + 1 + 7 bytes.
    octets = link.ll_tx_octets if hasattr(link, "ll_tx_octets") else 27
    model = count * (2 * latency + fleet_radio.airtime(7, octets, 1) + fleet_radio.airtime(12, octets, 1))
    print(f"  {count} ATT round trips: {ms(took)} ({ms(took / count)} each)   model: {ms(model)} "
          f"(2·N·L = {ms(2 * count * latency)})")
    blob = bytes(2048)
    for octets, phy in ((27, 1), (251, 1), (251, 2)):
        await host.host.send_sync_command(hci.HCI_LE_Set_Data_Length_Command(
            connection_handle=connection.handle, tx_octets=octets, tx_time=(octets + 14) * 8))
        await host.host.send_command(hci.HCI_LE_Set_PHY_Command(
            connection_handle=connection.handle, all_phys=0, tx_phys=1 << (phy - 1), rx_phys=1 << (phy - 1),
            phy_options=0))
        await peer.read_value(serial)  # both procedures are over once a round trip has crossed after them
        await asyncio.sleep(8 * latency)
        started = time.monotonic()
        for offset in range(0, len(blob), 244):
            await peer.write_value(fff4, blob[offset:offset + 244], with_response=False)
        await peer.write_value(fff1, b"\x09", with_response=True)
        took = time.monotonic() - started
        air = sum(fleet_radio.airtime(4 + 3 + len(blob[o:o + 244]), link.ll_tx_octets, link.ll_tx_phy)
                  for o in range(0, len(blob), 244))
        request = fleet_radio.airtime(4 + 4, link.ll_tx_octets, link.ll_tx_phy) + fleet_radio.airtime(5, 27, 1)
        model = 2 * latency + air + request
        print(f"  blob 2048 bytes + a write request at {link.ll_tx_octets} octets, {'2M' if link.ll_tx_phy == 2 else '1M'}: "
              f"{ms(took)}   model: {ms(model)} (blob airtime {ms(air)})")
    started = time.monotonic()
    await connection.disconnect()
    print(f"  disconnect: {ms(time.monotonic() - started)}   model: {ms(latency)}")


async def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--adv", default="100ms,1s")
    parser.add_argument("--latency", default="7.5ms,25ms")
    parser.add_argument("--connects", type=int, default=20)
    parser.add_argument("--round-trips", type=int, default=20)
    args = parser.parse_args()
    for adv_text in args.adv.split(","):
        adv = parse_duration(adv_text)
        print(f"advertising interval {adv_text}", flush=True)
        await advertising(adv)
        for latency_text in args.latency.split(","):
            latency = parse_duration(latency_text)
            print(f" link latency {latency_text} each way", flush=True)
            await connect(adv, latency, args.connects)
            await round_trips(adv, latency, args.round_trips)


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
