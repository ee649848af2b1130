#!/usr/bin/env python3
"""Tests of the fixture itself: the station controller honours what a real controller does, the
paced link keeps its model, and the devices follow docs/devices/sensor-v2.md.

    cd Tests/Fixtures && ../../.venv/bin/python3 -m unittest -v test_bumble_fleet

Each test runs a small fleet in-process: the devices and a station controller on one PacedLink, and
Bumble's own host on the station as a plain HCI client. Assertions are on what was said over HCI
(events, statuses) and on device-side state, never on how long something took.
"""

import asyncio
import os
import tempfile
import unittest

from bumble import hci
from bumble.att import ATT_Error, ErrorCode
from bumble.core import UUID
from bumble.device import Device, Peer
from bumble.pairing import PairingConfig, PairingDelegate

import fleet_radio
from bumble_fleet import SensorV2, default_devices, parse_latency
from fleet_radio import LinkTiming, PacedLink, StationController

TIMEOUT = 10.0
Status = hci.HCI_ErrorCode


class Recorder:
    """Sits between the station controller and its host and keeps every packet the host receives."""

    def __init__(self, sink):
        self.sink = sink
        self.packets = []
        self.arrived = asyncio.Event()

    def on_packet(self, packet):
        self.packets.append(hci.HCI_Packet.from_bytes(packet))
        self.arrived.set()
        self.sink.on_packet(packet)

    def mark(self):
        return len(self.packets)

    def events(self, kind, since=0):
        return [p for p in self.packets[since:] if isinstance(p, kind)]

    async def wait_for(self, kind, since=0, where=lambda _e: True):
        async def search():
            seen = since
            while True:
                for packet in self.packets[seen:]:
                    if isinstance(packet, kind) and where(packet):
                        return packet
                seen = len(self.packets)
                self.arrived.clear()
                await self.arrived.wait()
        return await asyncio.wait_for(search(), TIMEOUT)


class Fleet:
    """Devices and station controllers on one link, each station driven by a Bumble host."""

    def __init__(self, devices=3, specs=None, latency=(0.0, 0.0), adv_interval=0.02, quirks=(), **station):
        self.state_dir = tempfile.mkdtemp(prefix="fleet-test-")
        self.link = PacedLink(LinkTiming(latency, seed=7))
        self.specs = specs or default_devices(devices)
        self.adv_interval = adv_interval
        self.quirks = quirks
        self.station_options = station
        self.sensors = []
        self.stations = []

    async def start(self, stations=1):
        self.sensors = [SensorV2(spec, self.link, self.state_dir, seed=7, adv_interval=self.adv_interval,
                                 quirks=self.quirks) for spec in self.specs]
        for sensor in self.sensors:
            await sensor.start()
        for i in range(stations):
            controller = StationController(f"station{i + 1}", link=self.link, public_address=f"00:AA:00:00:00:0{i + 1}",
                                           seed=7, **self.station_options)
            host = Device.with_hci(f"host{i + 1}", hci.Address(f"C0:00:00:00:00:0{i + 1}"), controller, controller)
            recorder = Recorder(controller.hci_sink)
            controller.hci_sink = recorder
            await host.power_on()
            # Connections this test creates with raw commands are made from the random address.
            host.connect_own_address_type = hci.OwnAddressType.RANDOM
            self.stations.append((controller, host, recorder))
        return self

    def address(self, index):
        return hci.Address(self.specs[index - 1]["address"], hci.Address.RANDOM_DEVICE_ADDRESS)

    def sensor(self, index):
        return self.sensors[index - 1]


def create_connection(policy, peer=hci.Address.ANY_RANDOM, interval=0x18):
    return hci.HCI_LE_Create_Connection_Command(
        le_scan_interval=0x60, le_scan_window=0x60, initiator_filter_policy=policy,
        peer_address_type=peer.address_type, peer_address=peer, own_address_type=hci.OwnAddressType.RANDOM,
        connection_interval_min=interval, connection_interval_max=interval, max_latency=0, supervision_timeout=500,
        min_ce_length=0, max_ce_length=0)


async def command(host, cmd):
    """The status of `cmd`: from its Command Complete or its Command Status."""
    event = await asyncio.wait_for(host.host.send_command(cmd), TIMEOUT)
    if isinstance(event, hci.HCI_Command_Status_Event):
        return event.status
    return event.return_parameters.status


def add(address):
    return hci.HCI_LE_Add_Device_To_Filter_Accept_List_Command(address_type=address.address_type, address=address)


def remove(address):
    return hci.HCI_LE_Remove_Device_From_Filter_Accept_List_Command(address_type=address.address_type, address=address)


def is_connection_complete(event):
    return isinstance(event, (hci.HCI_LE_Connection_Complete_Event, hci.HCI_LE_Enhanced_Connection_Complete_Event))


class AcceptListTests(unittest.IsolatedAsyncioTestCase):
    async def test_an_accept_list_initiation_connects_whichever_listed_device_advertises(self):
        fleet = await Fleet(specs=default_devices(3, silent={1})).start()
        station, host, recorder = fleet.stations[0]
        # Device 1 is listed but silent, device 2 advertises but is not listed, device 3 is both.
        self.assertEqual(await command(host, add(fleet.address(1))), Status.SUCCESS)
        self.assertEqual(await command(host, add(fleet.address(3))), Status.SUCCESS)
        mark = recorder.mark()
        self.assertEqual(await command(host, create_connection(policy=1)), hci.HCI_COMMAND_STATUS_PENDING)
        complete = await recorder.wait_for(hci.HCI_LE_Meta_Event, mark, is_connection_complete)
        self.assertEqual(complete.status, Status.SUCCESS)
        self.assertEqual(complete.peer_address, fleet.address(3))
        self.assertIsNone(station.pending_le_connection)
        self.assertEqual(fleet.sensor(3).connections, 1)
        self.assertEqual(fleet.sensor(2).connections, 0)

    async def test_the_list_cannot_change_while_an_accept_list_initiation_is_pending(self):
        fleet = await Fleet(specs=default_devices(2, silent={1})).start()
        _, host, recorder = fleet.stations[0]
        self.assertEqual(await command(host, add(fleet.address(1))), Status.SUCCESS)
        self.assertEqual(await command(host, create_connection(policy=1)), hci.HCI_COMMAND_STATUS_PENDING)
        self.assertEqual(await command(host, add(fleet.address(2))), Status.COMMAND_DISALLOWED_ERROR)
        self.assertEqual(await command(host, remove(fleet.address(1))), Status.COMMAND_DISALLOWED_ERROR)
        self.assertEqual(await command(host, hci.HCI_LE_Clear_Filter_Accept_List_Command()),
                         Status.COMMAND_DISALLOWED_ERROR)
        # A second initiation while one is pending is refused too.
        self.assertEqual(await command(host, create_connection(policy=0, peer=fleet.address(2))),
                         Status.COMMAND_DISALLOWED_ERROR)
        # Cancel ends it with a Connection Complete (Unknown Connection Identifier); then the list is free.
        mark = recorder.mark()
        self.assertEqual(await command(host, hci.HCI_LE_Create_Connection_Cancel_Command()), Status.SUCCESS)
        cancelled = await recorder.wait_for(hci.HCI_LE_Meta_Event, mark, is_connection_complete)
        self.assertEqual(cancelled.status, Status.UNKNOWN_CONNECTION_IDENTIFIER_ERROR)
        self.assertEqual(await command(host, add(fleet.address(2))), Status.SUCCESS)
        self.assertEqual(await command(host, hci.HCI_LE_Create_Connection_Cancel_Command()),
                         Status.COMMAND_DISALLOWED_ERROR)

    async def test_the_list_has_the_size_it_reports(self):
        fleet = await Fleet(devices=5, fal_size=4).start()
        station, host, _ = fleet.stations[0]
        size = await asyncio.wait_for(host.host.send_sync_command(
            hci.HCI_LE_Read_Filter_Accept_List_Size_Command()), TIMEOUT)
        self.assertEqual(size.filter_accept_list_size, 4)
        for i in range(1, 5):
            self.assertEqual(await command(host, add(fleet.address(i))), Status.SUCCESS)
        self.assertEqual(await command(host, add(fleet.address(1))), Status.SUCCESS)  # already there
        self.assertEqual(await command(host, add(fleet.address(5))), Status.MEMORY_CAPACITY_EXCEEDED_ERROR)
        self.assertEqual(await command(host, remove(fleet.address(5))), Status.SUCCESS)  # absent: no error
        self.assertEqual(await command(host, remove(fleet.address(4))), Status.SUCCESS)
        self.assertEqual(await command(host, add(fleet.address(5))), Status.SUCCESS)
        self.assertEqual(len(station.accept_list), 4)
        self.assertEqual(await command(host, hci.HCI_LE_Clear_Filter_Accept_List_Command()), Status.SUCCESS)
        self.assertEqual(station.accept_list, [])
        # Reset empties it too.
        await command(host, add(fleet.address(1)))
        await command(host, hci.HCI_Reset_Command())
        self.assertEqual(station.accept_list, [])

    async def test_scanning_with_the_accept_list_reports_only_listed_devices(self):
        fleet = await Fleet(devices=3).start(stations=2)
        (_, host, recorder), (_, witness, heard) = fleet.stations
        await command(host, add(fleet.address(2)))
        await command(host, hci.HCI_LE_Set_Scan_Parameters_Command(
            le_scan_type=0, le_scan_interval=0x10, le_scan_window=0x10, own_address_type=1, scanning_filter_policy=1))
        mark = recorder.mark()
        await command(host, hci.HCI_LE_Set_Scan_Enable_Command(le_scan_enable=1, filter_duplicates=1))
        # A second station that scans without a filter hears what the first one is offered.
        await command(witness, hci.HCI_LE_Set_Scan_Enable_Command(le_scan_enable=1, filter_duplicates=0))
        since = heard.mark()
        for device in (1, 2, 3, 1, 3):
            since = heard.packets.index(await heard.wait_for(
                hci.HCI_LE_Advertising_Report_Event, since,
                lambda e, a=fleet.address(device): any(r.address == a for r in e.reports))) + 1
        self.assertEqual(await command(host, add(fleet.address(3))), Status.COMMAND_DISALLOWED_ERROR)
        await command(host, hci.HCI_LE_Set_Scan_Enable_Command(le_scan_enable=0, filter_duplicates=0))
        reports = [r for e in recorder.events(hci.HCI_LE_Advertising_Report_Event, mark) for r in e.reports]
        # Passive scanning, duplicates filtered: one ADV_IND, from the listed device only.
        self.assertEqual([(r.address, r.event_type) for r in reports],
                         [(fleet.address(2), hci.HCI_LE_Advertising_Report_Event.EventType.ADV_IND)])


class ConnectionTests(unittest.IsolatedAsyncioTestCase):
    async def test_scanning_goes_on_while_a_connection_is_initiated(self):
        fleet = await Fleet(specs=default_devices(3, silent={1})).start()
        _, host, recorder = fleet.stations[0]
        states = await asyncio.wait_for(host.host.send_sync_command(hci.HCI_LE_Read_Supported_States_Command()),
                                        TIMEOUT)
        self.assertTrue(int.from_bytes(states.le_states, "little") & fleet_radio.STATES_SCAN_WHILE_INITIATING)
        await command(host, hci.HCI_LE_Set_Scan_Parameters_Command(
            le_scan_type=1, le_scan_interval=0x10, le_scan_window=0x10, own_address_type=1, scanning_filter_policy=0))
        await command(host, hci.HCI_LE_Set_Scan_Enable_Command(le_scan_enable=1, filter_duplicates=0))
        # Initiating towards the silent device: it never completes, and reports keep coming.
        self.assertEqual(await command(host, create_connection(policy=0, peer=fleet.address(1))),
                         hci.HCI_COMMAND_STATUS_PENDING)
        mark = recorder.mark()
        for device in (2, 3):
            await recorder.wait_for(hci.HCI_LE_Advertising_Report_Event, mark,
                                    lambda e, a=fleet.address(device): any(r.address == a for r in e.reports))
        kinds = {r.event_type for e in recorder.events(hci.HCI_LE_Advertising_Report_Event, mark) for r in e.reports}
        self.assertEqual(kinds, {hci.HCI_LE_Advertising_Report_Event.EventType.ADV_IND,
                                 hci.HCI_LE_Advertising_Report_Event.EventType.SCAN_RSP})  # active scanning

    async def test_a_controller_that_cannot_scan_while_initiating_says_so_and_refuses(self):
        fleet = await Fleet(specs=default_devices(2, silent={1}), scan_while_initiating=False).start()
        _, host, _ = fleet.stations[0]
        states = await asyncio.wait_for(host.host.send_sync_command(hci.HCI_LE_Read_Supported_States_Command()),
                                        TIMEOUT)
        self.assertFalse(int.from_bytes(states.le_states, "little") & fleet_radio.STATES_SCAN_WHILE_INITIATING)
        await command(host, hci.HCI_LE_Set_Scan_Enable_Command(le_scan_enable=1, filter_duplicates=0))
        self.assertEqual(await command(host, create_connection(policy=0, peer=fleet.address(1))),
                         Status.COMMAND_DISALLOWED_ERROR)
        await command(host, hci.HCI_LE_Set_Scan_Enable_Command(le_scan_enable=0, filter_duplicates=0))
        self.assertEqual(await command(host, create_connection(policy=0, peer=fleet.address(1))),
                         hci.HCI_COMMAND_STATUS_PENDING)
        self.assertEqual(await command(host, hci.HCI_LE_Set_Scan_Enable_Command(le_scan_enable=1, filter_duplicates=0)),
                         Status.COMMAND_DISALLOWED_ERROR)

    async def test_links_beyond_the_limit_are_refused_at_create(self):
        fleet = await Fleet(devices=2, max_links=1).start()
        _, host, recorder = fleet.stations[0]
        await asyncio.wait_for(host.connect(fleet.address(1)), TIMEOUT)
        self.assertEqual(await command(host, create_connection(policy=0, peer=fleet.address(2))),
                         Status.CONNECTION_LIMIT_EXCEEDED_ERROR)
        self.assertEqual(fleet.sensor(2).connections, 0)

    async def test_links_beyond_the_limit_are_refused_at_complete(self):
        fleet = await Fleet(devices=2, max_links=1, max_links_at="complete").start()
        _, host, recorder = fleet.stations[0]
        await asyncio.wait_for(host.connect(fleet.address(1)), TIMEOUT)
        mark = recorder.mark()
        self.assertEqual(await command(host, create_connection(policy=0, peer=fleet.address(2))),
                         hci.HCI_COMMAND_STATUS_PENDING)
        refused = await recorder.wait_for(hci.HCI_LE_Meta_Event, mark, is_connection_complete)
        self.assertEqual(refused.status, Status.CONNECTION_LIMIT_EXCEEDED_ERROR)
        self.assertEqual(fleet.sensor(2).connections, 0)

    async def test_a_connected_peer_cannot_be_connected_again(self):
        fleet = await Fleet(devices=1).start()
        _, host, _ = fleet.stations[0]
        await asyncio.wait_for(host.connect(fleet.address(1)), TIMEOUT)
        self.assertEqual(await command(host, create_connection(policy=0, peer=fleet.address(1))),
                         Status.CONNECTION_ALREADY_EXISTS_ERROR)

    async def test_two_initiators_answering_one_advertising_event_get_one_link(self):
        # The device starts advertising only once both initiations are pending (on a loaded machine the
        # second command could otherwise come after the first event), then once a second.
        fleet = await Fleet(specs=default_devices(1, silent=(1,)), adv_interval=1.0).start(stations=2)
        (a, host_a, rec_a), (b, host_b, rec_b) = fleet.stations
        marks = rec_a.mark(), rec_b.mark()
        for host in (host_a, host_b):
            self.assertEqual(await command(host, create_connection(policy=0, peer=fleet.address(1))),
                             hci.HCI_COMMAND_STATUS_PENDING)
        sensor = fleet.sensor(1)
        await sensor.device.start_advertising(advertising_data=sensor.advertising_data(), auto_restart=True,
                                              advertising_interval_min=1000, advertising_interval_max=1000)
        first = await rec_a.wait_for(hci.HCI_LE_Meta_Event, marks[0], is_connection_complete)
        second = await rec_b.wait_for(hci.HCI_LE_Meta_Event, marks[1], is_connection_complete)
        # Both believe they connected; the device took one, and the other link fails to be established.
        self.assertEqual((first.status, second.status), (Status.SUCCESS, Status.SUCCESS))
        self.assertEqual(fleet.sensor(1).connections, 1)
        lost = await rec_b.wait_for(hci.HCI_Disconnection_Complete_Event, marks[1])
        self.assertEqual(lost.reason, Status.CONNECTION_FAILED_TO_BE_ESTABLISHED_ERROR)
        self.assertEqual(rec_a.events(hci.HCI_Disconnection_Complete_Event, marks[0]), [])

    async def test_the_enhanced_connection_complete_goes_to_a_host_that_unmasked_it(self):
        fleet = await Fleet(devices=1).start()
        station, host, recorder = fleet.stations[0]
        mark = recorder.mark()
        await asyncio.wait_for(host.connect(fleet.address(1)), TIMEOUT)
        # Bumble's host unmasks LE Enhanced Connection Complete.
        self.assertEqual(len(recorder.events(hci.HCI_LE_Enhanced_Connection_Complete_Event, mark)), 1)
        self.assertEqual(recorder.events(hci.HCI_LE_Connection_Complete_Event, mark), [])

    async def test_a_local_disconnect_completes_with_connection_terminated_by_local_host(self):
        fleet = await Fleet(devices=1, latency=(0.005, 0.005)).start()
        _, host, recorder = fleet.stations[0]
        connection = await asyncio.wait_for(host.connect(fleet.address(1)), TIMEOUT)
        mark = recorder.mark()
        await asyncio.wait_for(connection.disconnect(), TIMEOUT)
        done = await recorder.wait_for(hci.HCI_Disconnection_Complete_Event, mark)
        self.assertEqual(done.reason, Status.CONNECTION_TERMINATED_BY_LOCAL_HOST_ERROR)
        self.assertEqual(fleet.sensor(1).disconnections, 1)


class DataLengthAndPhyTests(unittest.IsolatedAsyncioTestCase):
    async def test_the_controller_claims_data_length_and_2m_but_not_what_it_cannot_do(self):
        fleet = await Fleet(devices=1).start()
        _, host, _ = fleet.stations[0]
        features = await asyncio.wait_for(host.host.send_sync_command(
            hci.HCI_LE_Read_Local_Supported_Features_Command()), TIMEOUT)
        mask = hci.LeFeatureMask(int.from_bytes(features.le_features, "little"))
        self.assertIn(hci.LeFeatureMask.LE_DATA_PACKET_LENGTH_EXTENSION, mask)
        self.assertIn(hci.LeFeatureMask.LE_2M_PHY, mask)
        self.assertNotIn(hci.LeFeatureMask.LE_CODED_PHY, mask)
        self.assertNotIn(hci.LeFeatureMask.LE_EXTENDED_ADVERTISING, mask)

    async def test_set_data_length_and_set_phy_run_their_procedures_and_report(self):
        fleet = await Fleet(devices=1, latency=(0.002, 0.002)).start()
        station, host, recorder = fleet.stations[0]
        connection = await asyncio.wait_for(host.connect(fleet.address(1)), TIMEOUT)
        # Bumble's host wrote a suggested default of 251: the station updated the new link by itself.
        change = await recorder.wait_for(hci.HCI_LE_Data_Length_Change_Event)
        self.assertEqual((change.max_tx_octets, change.max_rx_octets), (251, 251))
        link = station.find_le_connection_by_handle(connection.handle)
        self.assertEqual((link.ll_tx_octets, link.ll_rx_octets), (251, 251))

        mark = recorder.mark()
        set_length = hci.HCI_LE_Set_Data_Length_Command(connection_handle=connection.handle, tx_octets=100,
                                                        tx_time=(100 + 14) * 8)
        self.assertEqual(await command(host, set_length), Status.SUCCESS)
        change = await recorder.wait_for(hci.HCI_LE_Data_Length_Change_Event, mark)
        self.assertEqual((change.max_tx_octets, change.max_rx_octets), (100, 251))
        bad = hci.HCI_LE_Set_Data_Length_Command(connection_handle=connection.handle, tx_octets=300, tx_time=328)
        self.assertEqual(await command(host, bad), Status.INVALID_COMMAND_PARAMETERS_ERROR)

        mark = recorder.mark()
        set_phy = hci.HCI_LE_Set_PHY_Command(connection_handle=connection.handle, all_phys=0, tx_phys=0x02,
                                             rx_phys=0x02, phy_options=0)
        self.assertEqual(await command(host, set_phy), hci.HCI_COMMAND_STATUS_PENDING)
        update = await recorder.wait_for(hci.HCI_LE_PHY_Update_Complete_Event, mark)
        self.assertEqual((update.status, update.tx_phy, update.rx_phy), (Status.SUCCESS, 2, 2))
        phy = await asyncio.wait_for(host.host.send_sync_command(
            hci.HCI_LE_Read_PHY_Command(connection_handle=connection.handle)), TIMEOUT)
        self.assertEqual((phy.tx_phy, phy.rx_phy), (2, 2))
        # The device's side of the link follows.
        device_link = fleet.sensor(1).controller.le_connections[station.random_address]
        self.assertEqual((device_link.ll_tx_phy, device_link.ll_rx_phy, device_link.ll_tx_octets), (2, 2, 251))
        coded = hci.HCI_LE_Set_PHY_Command(connection_handle=connection.handle, all_phys=0, tx_phys=0x04,
                                           rx_phys=0x04, phy_options=0)
        self.assertEqual(await command(host, coded), Status.UNSUPPORTED_FEATURE_OR_PARAMETER_VALUE_ERROR)
        unknown = hci.HCI_LE_Set_PHY_Command(connection_handle=0x0EEE, all_phys=0, tx_phys=2, rx_phys=2, phy_options=0)
        self.assertEqual(await command(host, unknown), Status.UNKNOWN_CONNECTION_IDENTIFIER_ERROR)


class ReadRSSITests(unittest.IsolatedAsyncioTestCase):
    async def test_read_rssi_answers_for_a_link_and_refuses_an_unknown_handle(self):
        fleet = await Fleet(devices=1).start()
        _, host, _ = fleet.stations[0]
        connection = await asyncio.wait_for(host.connect(fleet.address(1)), TIMEOUT)
        answer = await asyncio.wait_for(host.host.send_sync_command(
            hci.HCI_Read_RSSI_Command(handle=connection.handle)), TIMEOUT)
        self.assertEqual((answer.status, answer.handle, answer.rssi), (Status.SUCCESS, connection.handle, -50))
        unknown = await asyncio.wait_for(host.host.send_sync_command_raw(
            hci.HCI_Read_RSSI_Command(handle=0x0EEE)), TIMEOUT)
        self.assertEqual(unknown.return_parameters.status, Status.UNKNOWN_CONNECTION_IDENTIFIER_ERROR)


class PacedLinkTests(unittest.IsolatedAsyncioTestCase):
    def test_airtime_follows_data_length_and_phy(self):
        # 27 octets on 1M: (10 + 27) × 8 µs + 150 µs + 10 × 8 µs + 150 µs.
        self.assertAlmostEqual(fleet_radio.pdu_airtime(27, 1), 676e-6)
        self.assertAlmostEqual(fleet_radio.pdu_airtime(251, 2), (11 + 251) * 4e-6 + 150e-6 + 44e-6 + 150e-6)
        # A 251-byte L2CAP PDU: ten LL PDUs at 27 octets (9 full, one of 8), one at 251.
        self.assertAlmostEqual(fleet_radio.airtime(251, 27, 1),
                               9 * fleet_radio.pdu_airtime(27, 1) + fleet_radio.pdu_airtime(8, 1))
        self.assertAlmostEqual(fleet_radio.airtime(251, 251, 1), fleet_radio.pdu_airtime(251, 1))
        self.assertEqual(parse_latency("7.5ms-25ms"), (0.0075, 0.025))
        self.assertEqual(parse_latency("1s"), (1.0, 1.0))
        with self.assertRaises(ValueError):
            parse_latency("25ms-7.5ms")
        with self.assertRaises(ValueError):
            parse_latency("7.5")

    async def test_pdus_wait_for_the_link_delay_and_keep_their_order(self):
        link = PacedLink(LinkTiming((0.0075, 0.025), seed=3))
        a, b = hci.Address("C0:00:00:00:00:01"), hci.Address("F0:00:00:00:00:01")
        loop = asyncio.get_running_loop()
        arrived = []
        scheduled = []
        done = asyncio.Event()

        def arrive(i):
            arrived.append(i)
            if len(arrived) == 50:
                done.set()

        for i in range(50):
            now = loop.time()
            at = link.schedule(a, b, 30, 27, 1, lambda i=i: arrive(i))
            self.assertGreaterEqual(at, now + 0.0075 + fleet_radio.airtime(30, 27, 1) - 1e-9)
            scheduled.append(at)
        self.assertEqual(scheduled, sorted(scheduled))
        # The other direction has its own queue.
        back = link.schedule(b, a, 30, 27, 1, lambda: None)
        self.assertLess(back, scheduled[-1])
        await asyncio.wait_for(done.wait(), TIMEOUT)
        self.assertEqual(arrived, list(range(50)))

    async def test_round_trips_on_a_paced_link_still_deliver_everything(self):
        fleet = await Fleet(devices=1, latency=(0.001, 0.003)).start()
        _, host, recorder = fleet.stations[0]
        connection = await asyncio.wait_for(host.connect(fleet.address(1)), TIMEOUT)
        peer = Peer(connection)
        await asyncio.wait_for(peer.discover_services(), TIMEOUT)
        for service in peer.services:
            await asyncio.wait_for(service.discover_characteristics(), TIMEOUT)
        serial = peer.get_characteristics_by_uuid(UUID("2A25"))[0]
        self.assertEqual(await asyncio.wait_for(peer.read_value(serial), TIMEOUT), b"SN-0001")
        # Every ACL packet the host sent was completed, after it had crossed the link.
        completed = sum(sum(e.num_completed_packets)
                        for e in recorder.events(hci.HCI_Number_Of_Completed_Packets_Event))
        self.assertGreater(completed, 0)
        self.assertEqual(fleet.stations[0][0]._unsent_packets.get(connection.handle, 0), 0)

    async def test_each_acl_packet_completes_when_it_has_crossed_whole_pdu_or_not(self):
        # A host that interleaves the fragments of several links must get its credits back for a
        # fragment whose L2CAP PDU it has not finished handing over (a controller does not read L2CAP).
        fleet = await Fleet(devices=1, latency=(0.002, 0.002)).start()
        controller, host, recorder = fleet.stations[0]
        connection = await asyncio.wait_for(host.connect(fleet.address(1)), TIMEOUT)
        peer = Peer(connection)
        await asyncio.wait_for(peer.discover_services(), TIMEOUT)
        for service in peer.services:
            await asyncio.wait_for(service.discover_characteristics(), TIMEOUT)
        control = peer.get_characteristics_by_uuid(UUID("FFF1"))[0].handle
        # Write Request 01 AA to FFF1 in one L2CAP frame on the ATT channel, handed over in two packets.
        att = bytes([0x12, control & 0xFF, control >> 8, 0x01, 0xAA])
        frame = len(att).to_bytes(2, "little") + (4).to_bytes(2, "little") + att
        first, rest = frame[:5], frame[5:]

        def completed(event):
            return connection.handle in event.connection_handles

        mark = recorder.mark()
        host.host.send_hci_packet(hci.HCI_AclDataPacket(connection.handle, hci.HCI_ACL_PB_FIRST_NON_FLUSHABLE, 0,
                                                        len(first), first))
        await recorder.wait_for(hci.HCI_Number_Of_Completed_Packets_Event, mark, completed)
        self.assertIsNone(fleet.sensor(1).config, "the command is not whole yet")
        mark = recorder.mark()
        host.host.send_hci_packet(hci.HCI_AclDataPacket(connection.handle, hci.HCI_ACL_PB_CONTINUATION, 0,
                                                        len(rest), rest))
        await recorder.wait_for(hci.HCI_Number_Of_Completed_Packets_Event, mark, completed)
        await recorder.wait_for(hci.HCI_AclDataPacket, mark, lambda p: bytes(p.data)[4:5] == b"\x13")
        self.assertEqual(fleet.sensor(1).config, b"\xAA")
        self.assertEqual(controller._unsent_packets.get(connection.handle, 0), 0)


class DeviceTests(unittest.IsolatedAsyncioTestCase):
    async def test_only_the_commit_is_idempotent(self):
        fleet = await Fleet(devices=1).start()
        d = fleet.sensor(1)
        self.assertEqual(d._execute(b"\x04"), b"\x04\x01")  # no blob begun
        d._on_blob(None, b"early")
        self.assertEqual((d.blob_dropped, len(d.blob)), (5, 0))
        self.assertEqual(d._execute(b"\x02"), b"\x02\x01")  # no config
        self.assertEqual(d._execute(b"\x01\xAA"), b"\x01\x00")
        self.assertEqual(d._execute(b"\x01\xBB\xCC"), b"\x01\x00")  # replaces the config
        self.assertEqual(d.config, b"\xBB\xCC")
        self.assertEqual(d._execute(b"\x03\x04\x00\x00\x00"), b"\x03\x00")
        d._on_blob(None, b"ab")
        self.assertEqual(d._execute(b"\x04"), b"\x04\x01")  # short: the blob stays open
        self.assertEqual(d._execute(b"\x03\x04\x00\x00\x00"), b"\x03\x00")  # a new blob: buffer cleared
        self.assertEqual(len(d.blob), 0)
        d._on_blob(None, b"abcd")
        self.assertEqual(d._execute(b"\x04"), b"\x04\x00")
        self.assertEqual(d._execute(b"\x04"), b"\x04\x01")  # already ended
        d._on_blob(None, b"late")
        self.assertEqual((d.blob_dropped, bytes(d.blob)), (9, b"abcd"))
        self.assertEqual(d._execute(b"\x02"), b"\x02\x00")
        self.assertEqual(d._execute(b"\x02"), b"\x02\x00")  # idempotent
        self.assertEqual((d.state, d.commits), (2, 2))
        self.assertEqual(d._execute(b"\x01\xDD"), b"\x01\x00")
        self.assertEqual(d.state, 1)
        self.assertEqual(d._execute(b"\x09"), b"\x09\xFF")

    async def test_ack_loss_at_a_rate_is_reproducible_from_the_seed(self):
        link = PacedLink()
        state_dir = tempfile.mkdtemp(prefix="fleet-test-")
        spec = default_devices(1)[0]

        def losses(seed, rate=0.3):
            d = SensorV2(dict(spec, faults=[f"ack_loss:{rate}"]), link, state_dir, seed=seed)
            return [d.ack_rng.random() < d.ack_loss_rate for _ in range(1000)]

        first, again, other = losses(5), losses(5), losses(6)
        self.assertEqual(first, again)
        self.assertNotEqual(first, other)
        self.assertTrue(200 < sum(first) < 400)
        d = SensorV2(dict(spec, faults=["ack_loss"]), link, state_dir)
        self.assertEqual(d.ack_loss_rate, 1.0)
        d = SensorV2(spec, link, state_dir, ack_loss_rate=0.25)
        self.assertEqual(d.ack_loss_rate, 0.25)
        with self.assertRaises(ValueError):
            SensorV2(dict(spec, faults=["ack_loss:2"]), link, state_dir)
        with self.assertRaises(ValueError):
            SensorV2(dict(spec, faults=["flaky"]), link, state_dir)

    async def test_the_uuid128_quirk_declares_sig_uuids_in_128_bit_form(self):
        fleet = await Fleet(devices=1, quirks=("uuid128",)).start()
        _, host, _ = fleet.stations[0]
        connection = await asyncio.wait_for(host.connect(fleet.address(1)), TIMEOUT)
        peer = Peer(connection)
        # Discovery by 16-bit service UUID (Find By Type Value) finds nothing ...
        self.assertEqual(await asyncio.wait_for(peer.discover_service(UUID("180A")), TIMEOUT), [])
        # ... full discovery finds every service (UUIDs compare in 128-bit form), and reads work.
        services = await asyncio.wait_for(peer.discover_services(), TIMEOUT)
        self.assertIn(UUID("180A"), [s.uuid for s in services])
        info = next(s for s in services if s.uuid == UUID("180A"))
        characteristics = await asyncio.wait_for(info.discover_characteristics(), TIMEOUT)
        serial = next(c for c in characteristics if c.uuid == UUID("2A25"))
        self.assertEqual(await asyncio.wait_for(peer.read_value(serial), TIMEOUT), b"SN-0001")
        # On the server, every service and characteristic declaration carries a 16-byte UUID (Bumble's
        # client maps known SIG UUIDs back to their 16-bit objects, so look at the declarations).
        declarations = [a for a in fleet.sensor(1).device.gatt_server.attributes
                        if a.type in (UUID("2800"), UUID("2803"))]
        ours = [a for a in declarations if a.handle > info.handle - 1]
        self.assertEqual(len(ours), 3 + 9)
        self.assertEqual({len(a.value) for a in ours if a.type == UUID("2800")}, {16})
        self.assertEqual({len(a.value) for a in ours if a.type == UUID("2803")}, {3 + 16})


class SecurityTests(unittest.IsolatedAsyncioTestCase):
    """Devices with --security: Bumble's Security Manager on both ends (the station's host pairs)."""

    async def control(self, connection):
        peer = Peer(connection)
        service = (await asyncio.wait_for(peer.discover_service(UUID("FFF0")), TIMEOUT))[0]
        characteristics = await asyncio.wait_for(service.discover_characteristics(), TIMEOUT)
        return peer, next(c for c in characteristics if c.uuid == UUID("FFF1"))

    async def test_an_authenticated_device_pairs_with_its_passkey_and_records_encrypted_writes(self):
        fleet = await Fleet(specs=default_devices(1, security="authenticated")).start()
        _, host, _ = fleet.stations[0]
        passkey = int(fleet.specs[0]["passkey"])

        class Keyboard(PairingDelegate):
            async def get_number(self):
                return passkey

        host.pairing_config_factory = lambda _c: PairingConfig(
            sc=True, mitm=True, bonding=True, delegate=Keyboard(io_capability=PairingDelegate.KEYBOARD_INPUT_ONLY))
        connection = await asyncio.wait_for(host.connect(fleet.address(1)), TIMEOUT)
        peer, fff1 = await self.control(connection)
        with self.assertRaises(ATT_Error) as refused:
            await asyncio.wait_for(peer.write_value(fff1, b"\x01\xaa", with_response=True), TIMEOUT)
        self.assertEqual(refused.exception.error_code, ErrorCode.INSUFFICIENT_ENCRYPTION)
        await asyncio.wait_for(connection.pair(), TIMEOUT)
        await asyncio.wait_for(peer.write_value(fff1, b"\x01\xaa", with_response=True), TIMEOUT)
        sensor = fleet.sensor(1)
        self.assertEqual([p["method"] for p in sensor.pairings], ["passkey_entry"])
        self.assertEqual(sensor.fff1_writes_encrypted, [True])
        self.assertEqual(sensor.config, b"\xaa")

    async def test_a_just_works_key_does_not_open_an_authenticated_device(self):
        fleet = await Fleet(specs=default_devices(1, security="authenticated")).start()
        _, host, _ = fleet.stations[0]
        host.pairing_config_factory = lambda _c: PairingConfig(
            sc=True, mitm=False, bonding=True, delegate=PairingDelegate(io_capability=PairingDelegate.NO_OUTPUT_NO_INPUT))
        connection = await asyncio.wait_for(host.connect(fleet.address(1)), TIMEOUT)
        peer, fff1 = await self.control(connection)
        await asyncio.wait_for(connection.pair(), TIMEOUT)
        with self.assertRaises(ATT_Error) as refused:
            await asyncio.wait_for(peer.write_value(fff1, b"\x01\xaa", with_response=True), TIMEOUT)
        self.assertEqual(refused.exception.error_code, ErrorCode.INSUFFICIENT_AUTHENTICATION)
        self.assertEqual(fleet.sensor(1).fff1_writes, [])

    async def test_a_device_that_forgets_its_bond_refuses_the_stored_key(self):
        fleet = await Fleet(specs=default_devices(1, security="encrypted", forget_bond={1})).start()
        _, host, _ = fleet.stations[0]
        connection = await asyncio.wait_for(host.connect(fleet.address(1)), TIMEOUT)
        await asyncio.wait_for(connection.pair(), TIMEOUT)
        await asyncio.wait_for(connection.disconnect(), TIMEOUT)
        await asyncio.wait_for(fleet.sensor(1).bond_forgotten.wait(), TIMEOUT)
        again = await asyncio.wait_for(host.connect(fleet.address(1)), TIMEOUT)
        with self.assertRaises(hci.HCI_Error) as failed:
            await asyncio.wait_for(again.encrypt(), TIMEOUT)
        self.assertEqual(failed.exception.error_code, hci.HCI_ErrorCode.PIN_OR_KEY_MISSING_ERROR)
        self.assertEqual(len(fleet.sensor(1).pairings), 1)


class Sink:
    """A host that only listens: every H4 packet a controller sends, as bytes."""

    def __init__(self):
        self.packets = []
        self.arrived = asyncio.Event()

    def on_packet(self, packet):
        self.packets.append(bytes(packet))
        self.arrived.set()

    async def next(self):
        while not self.packets:
            self.arrived.clear()
            await asyncio.wait_for(self.arrived.wait(), TIMEOUT)
        return self.packets.pop(0)


class ControllerKindTests(unittest.IsolatedAsyncioTestCase):
    async def test_a_zephyr_station_has_no_bd_addr_and_answers_its_vendor_commands(self):
        link = PacedLink()
        station = fleet_radio.ZephyrStationController("z", link=link, static_address="C4:5A:00:00:00:01")
        sink = Sink()
        station.host = sink
        station.on_packet(bytes([0x01, 0x09, 0x10, 0x00]))          # Read BD_ADDR
        self.assertEqual(await sink.next(), bytes.fromhex("040e0a01091000000000000000"))
        station.on_packet(bytes([0x01, 0x01, 0x10, 0x00]))          # Read Local Version Information
        self.assertEqual((await sink.next())[11:13], bytes([0xF1, 0x05]))
        station.on_packet(bytes([0x01, 0x02, 0xFC, 0x00]))          # Zephyr Read Supported Commands
        supported = await sink.next()
        self.assertEqual(supported[:7], bytes.fromhex("040e4401 02fc 00"))
        self.assertEqual(supported[7:9], bytes([0x03, 0x01]))       # bit 8: Read Static Addresses
        station.on_packet(bytes([0x01, 0x09, 0xFC, 0x00]))          # Zephyr Read Static Addresses
        statics = await sink.next()
        self.assertEqual(statics[:14], bytes.fromhex("040e1b01 09fc 00 01 010000005ac4"))
        self.assertEqual(len(statics), 3 + 0x1B)
        station.on_packet(bytes([0x01, 0x60, 0x20, 0x00]))          # LE Read Buffer Size v2
        self.assertEqual((await sink.next())[6:10], bytes.fromhex("00 fb00 0a"))

    async def test_a_hardware_error_follows_the_nth_connection_and_drops_the_links(self):
        fleet = await Fleet(devices=2, faults=[("hardware-error", 1)]).start()
        station, host, recorder = fleet.stations[0]
        mark = recorder.mark()
        await asyncio.wait_for(host.connect(fleet.address(1)), TIMEOUT)
        # Bumble has no class for it: the raw event (04 10 01 01) reaches the host as an unknown event.
        while not any(bytes(p)[:3] == bytes([0x04, 0x10, 0x01]) for p in recorder.packets[mark:]):
            recorder.arrived.clear()
            await asyncio.wait_for(recorder.arrived.wait(), TIMEOUT)
        self.assertEqual(station.le_connections, {})

    async def test_connection_events_pace_the_link_at_its_interval(self):
        link = PacedLink(LinkTiming(by_interval=True))

        class Side:
            ll_interval = 0.0075
            ll_anchor = 0.0

        loop = asyncio.get_running_loop()
        Side.ll_anchor = loop.time()
        arrivals = [link.schedule("a", "b", 27, 27, fleet_radio.PHY_1M, lambda: None, Side) for _ in range(3)]
        # The first waits for the next anchor; the next two follow it in the same event (More Data).
        event = (arrivals[0] - Side.ll_anchor) // Side.ll_interval
        self.assertLessEqual(arrivals[0] - (Side.ll_anchor + event * Side.ll_interval), fleet_radio.pdu_airtime(27, 1) + 1e-9)
        self.assertAlmostEqual(arrivals[1] - arrivals[0], fleet_radio.pdu_airtime(27, 1))
        self.assertAlmostEqual(arrivals[2] - arrivals[1], fleet_radio.pdu_airtime(27, 1))

    async def test_a_peripherals_link_layer_request_reaches_the_central_host_and_its_answer_the_device(self):
        fleet = await Fleet(devices=1).start()
        station, host, recorder = fleet.stations[0]
        connection = await asyncio.wait_for(host.connect(fleet.address(1)), TIMEOUT)
        # Unmask LE Remote Connection Parameter Request (bit 5), as the provision host does.
        await command(host, hci.HCI_LE_Set_Event_Mask_Command(le_event_mask=bytes.fromhex("3f1a000000000000")))
        sensor = fleet.sensor(1)
        device_side = next(iter(sensor.device.connections.values()))
        mark = recorder.mark()
        asking = asyncio.get_running_loop().create_task(device_side.update_parameters(10, 20, 0, 4000))
        request = await recorder.wait_for(hci.HCI_LE_Remote_Connection_Parameter_Request_Event, mark)
        self.assertEqual((request.connection_handle, request.interval_min, request.interval_max), (connection.handle, 8, 16))
        # Bumble's host answers it by itself (Reply with the request's range); the central runs the
        # shortest interval allowed, and the device's host hears the update.
        await asyncio.wait_for(asking, TIMEOUT)
        self.assertEqual(device_side.parameters.connection_interval, 10.0)
        self.assertEqual(station.pending_parameter_requests, {})

    async def test_extended_advertising_is_heard_only_by_an_extended_scan(self):
        fleet = await Fleet(specs=[dict(s, ext_adv="2M") for s in default_devices(1)], extended=True).start()
        station, host, recorder = fleet.stations[0]
        mark = recorder.mark()
        self.assertEqual(await command(host, hci.HCI_LE_Set_Scan_Enable_Command(le_scan_enable=1, filter_duplicates=0)),
                         Status.SUCCESS)
        await asyncio.sleep(0.2)  # several advertising events of the device (every 20 ms)
        self.assertEqual(recorder.events(hci.HCI_LE_Advertising_Report_Event, mark), [])
        await command(host, hci.HCI_LE_Set_Scan_Enable_Command(le_scan_enable=0, filter_duplicates=0))
        await command(host, hci.HCI_LE_Set_Extended_Scan_Parameters_Command(
            own_address_type=1, scanning_filter_policy=0, scanning_phys=1, scan_types=[0], scan_intervals=[0x60],
            scan_windows=[0x60]))
        await command(host, hci.HCI_LE_Set_Extended_Scan_Enable_Command(enable=1, filter_duplicates=0, duration=0, period=0))
        report = await recorder.wait_for(hci.HCI_LE_Extended_Advertising_Report_Event, mark)
        self.assertEqual(report.reports[0].secondary_phy, 2)
        self.assertEqual(report.reports[0].address, fleet.address(1))


if __name__ == "__main__":
    os.chdir(os.path.dirname(os.path.abspath(__file__)))
    unittest.main()
