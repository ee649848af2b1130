"""The virtual radio under the Bumble fleet: a paced link and controllers that behave like real ones.

Bumble's LocalLink delivers every PDU on the next turn of the event loop, and its virtual controller
skips several things a real controller does. A host tuned against that learns nothing about a radio.
This module fixes what matters for a provisioning host, and nothing more:

PacedLink (every controller of the fleet is on one, so the host under test and the Python baseline
get the same radio):
- Every LL data or control PDU waits for a connection event: it is delivered `latency` after it was
  handed to the link (a fixed value or drawn per PDU from a range) plus its airtime (PDU, inter-frame
  spaces and the peer's empty acknowledgement; at the connection's data length and PHY). A PDU handed
  over while earlier ones on the same link and direction are still on the air follows them in the same
  connection event (More Data). Order is kept per link and direction. `latency` 0 is Bumble's instant
  link. With a per-link `rate` (bits per second, each direction of each link on its own), a PDU holds
  the air for at least its bytes at that rate: a link slower than its PHY (short connection events, a
  busy controller) has a bandwidth of its own.
- A CONNECT_IND reaches the advertiser it names at once (it is sent T_IFS after the ADV_IND it answers),
  so of two initiators that answer the same advertising event only the first gets the device.
- Advertising PDUs go only to controllers that listen (scanning or initiating): devices never scan,
  and handing them every ADV_IND was most of the fleet's CPU.

PacedController (every controller, devices and stations):
- Advertising events every advInterval + advDelay (a random 0-10 ms, Vol 6 Part B 4.4.2.2.1), in real
  units (Bumble reads the 0.625 ms interval as milliseconds), the first at a random phase.
- Number Of Completed Packets when the packet has gone over the air, not when the host handed it over:
  the host's ACL credits follow the radio, as on a real controller. Each HCI ACL packet goes out on its
  own (an LL PDU with LLID start or continuation), whether or not the host has handed over the rest of
  its L2CAP PDU: a controller does not hold buffers until an L2CAP PDU is whole (it does not read
  L2CAP), so a host that interleaves the fragments of several links never runs out of credits.
- Disconnect: the local Disconnection Complete (reason 0x16, Connection Terminated By Local Host)
  follows the peer's acknowledgement of LL_TERMINATE_IND, one link delay later.
- LE Set Data Length and LE Set PHY run their LL procedures over the link and report LE Data Length
  Change / LE PHY Update Complete (where the LE event mask allows); the airtime follows them.
  LE Read PHY answers the connection's PHY. Supported: data length up to 251 octets, 1M and 2M PHY.

StationController (the controllers the hosts drive) adds, over PacedController:
- The Filter Accept List (LE Add/Remove/Clear, LE Read Filter Accept List Size), used by LE Create
  Connection with initiator filter policy 1 and by scanning filter policies 1 and 3.
- LE Create Connection: connects to the first matching device whose advertising event the initiator
  hears (inside its scan window); Command Disallowed while one is pending, ACL Connection Already
  Exists for a connected peer, Connection Limit Exceeded beyond `max_links`.
- LE Create Connection Cancel that ends the pending connection with a Connection Complete (0x02).
- Scanning that honours scan interval/window, duplicate filtering, active/passive (SCAN_RSP only when
  active), legacy reports, and keeps reporting while initiating when the supported states say so;
  when they do not, the combination is refused with Command Disallowed, as a controller without it does.
- LE Enhanced Connection Complete when the host unmasked it (the plain one otherwise).
- LE Read Local Supported Features that claims only what is honoured here.
- Reset that clears links, the pending connection, scanning and the Filter Accept List.
- Faults on cue (`faults`): a Hardware Error, or a restart that closes the host's connection, after
  the station's Nth connection.

Extended advertising: a device whose advertiser has `extended_phy` sends its advertising data only as
ADV_EXT_IND pointing to an AUX_ADV_IND on that secondary PHY (1M, 2M or coded). A station built with
`extended` has the LE Extended Advertising feature and commands: legacy scanning does not hear such
devices; LE Set Extended Scan Parameters/Enable reports them (LE Extended Advertising Report with the
secondary PHY); LE Extended Create Connection connects to them (AUX_CONNECT_REQ: the link starts on
the secondary PHY). Without `extended` the station refuses the extended commands, as before.

ZephyrStationController is a StationController that answers like a Zephyr controller (hci_uart,
hci_usb): manufacturer 0x05F1, BD_ADDR 00:00:00:00:00:00, Zephyr's vendor Read Supported Commands and
Read Static Addresses (a static random address of its own with its identity root), 251-byte LE ACL
buffers.

Connection intervals (`LinkTiming(by_interval=True)`): instead of a fixed delay, every LL PDU waits for
its link's next connection event (anchors every connInterval from the connection's start), PDUs handed
over during an event follow in it while it lasts (an event ends before the next anchor), so the
interval, the data length and the PHY all bound a link's throughput. LE Connection Update (central),
and the Connection Parameters Request procedure started by a peripheral's host (LL_CONNECTION_PARAM_REQ,
answered by the central's host through LE Remote Connection Parameter Request Reply or Negative Reply),
change the interval of both sides.
"""

import asyncio
import dataclasses
import hashlib
import logging
import math
import random

from bumble import hci, ll
from bumble.controller import Connection, Controller, LegacyAdvertiser
from bumble.core import PhysicalTransport
from bumble.host import Host
from bumble.link import LocalLink

logger = logging.getLogger("bumble_fleet.radio")
_controller_logger = logging.getLogger("bumble.controller")
_host_logger = logging.getLogger("bumble.host")

# Air timing (Vol 6 Part A 3.2, Part B 2.1 and 4.1.1).
T_IFS = 150e-6
LL_DEFAULT_OCTETS = 27
LL_MAX_OCTETS = 251
ADV_DELAY_MAX = 0.010
PHY_1M = 1
PHY_2M = 2
PHY_BITS = {PHY_1M: 0x01, PHY_2M: 0x02}
# LL control PDU payload sizes used for airtime (Vol 6 Part B 2.4.2).
LL_LENGTH_PDU = 9
LL_PHY_PDU = 3
LL_PHY_UPDATE_IND = 5
LL_TERMINATE_IND = 2
LL_CONTROL_PDU = 9  # others: as long as the longest used here

LOCAL_HOST_TERMINATED = hci.HCI_ErrorCode.CONNECTION_TERMINATED_BY_LOCAL_HOST_ERROR
FAILED_TO_BE_ESTABLISHED = hci.HCI_ErrorCode.CONNECTION_FAILED_TO_BE_ESTABLISHED_ERROR

# LE event mask bits (Vol 4 Part E 7.8.1): bit n is subevent n + 1.
LE_CONNECTION_COMPLETE = hci.HCI_LE_CONNECTION_COMPLETE_EVENT
LE_DATA_LENGTH_CHANGE = hci.HCI_LE_DATA_LENGTH_CHANGE_EVENT
LE_ENHANCED_CONNECTION_COMPLETE = hci.HCI_LE_ENHANCED_CONNECTION_COMPLETE_EVENT
LE_PHY_UPDATE_COMPLETE = hci.HCI_LE_PHY_UPDATE_COMPLETE_EVENT
LE_REMOTE_CONNECTION_PARAMETER_REQUEST = hci.HCI_LE_REMOTE_CONNECTION_PARAMETER_REQUEST_EVENT
UNACCEPTABLE_CONNECTION_PARAMETERS = 0x3B
EVENT_MASK_LE_META = 1 << 61

# LE Read Supported States (Vol 4 Part E 7.8.27): bits 22 and 23 are passive and active scanning
# combined with initiating.
STATES_SCAN_WHILE_INITIATING = (1 << 22) | (1 << 23)

# What PacedController honours; Bumble claims more (coded PHY, extended and periodic advertising,
# privacy) than its virtual controller does on this link.
LE_FEATURES = (
    hci.LeFeatureMask.LE_ENCRYPTION
    | hci.LeFeatureMask.EXTENDED_REJECT_INDICATION
    | hci.LeFeatureMask.PERIPHERAL_INITIATED_FEATURE_EXCHANGE
    | hci.LeFeatureMask.LE_DATA_PACKET_LENGTH_EXTENSION
    | hci.LeFeatureMask.LE_2M_PHY
)


def pdu_airtime(octets, phy):
    """Seconds one LL data PDU with `octets` of payload holds the air: the PDU, T_IFS, the peer's empty
    PDU that acknowledges it, T_IFS. Preamble, access address, header and CRC are 10 octets on 1M and
    11 on 2M (a two-octet preamble); 1M sends 8 µs per octet, 2M 4 µs."""
    overhead, per_octet = (11, 4e-6) if phy == PHY_2M else (10, 8e-6)
    return (overhead + octets) * per_octet + T_IFS + overhead * per_octet + T_IFS


def airtime(length, octets, phy):
    """Seconds an L2CAP PDU of `length` bytes takes, split into LL PDUs of at most `octets`."""
    full, rest = divmod(length, octets)
    time = full * pdu_airtime(octets, phy)
    if rest or not full:
        time += pdu_airtime(rest, phy)
    return time


def max_time(octets):
    """connMaxTxTime/connMaxRxTime in µs for `octets` on 1M (Vol 6 Part B 4.5.10): (octets + 14) × 8."""
    return (octets + 14) * 8


class LinkTiming:
    """The link delay of every PDU: `latency` seconds, fixed or drawn uniformly from (low, high), or, with
    `by_interval`, the wait for the link's next connection event; and `rate`, the bits per second one
    direction of one link carries at most (None: its PHY's)."""

    def __init__(self, latency=(0.0, 0.0), seed=1, rate=None, by_interval=False):
        self.low, self.high = latency
        self.rate = rate
        self.rng = random.Random(f"{seed}/link")
        self.by_interval = by_interval

    def airtime(self, length, octets, phy):
        """Seconds `length` bytes hold one direction of a link: at the PHY, and no less than at `rate`."""
        time = airtime(length, octets, phy)
        return max(time, length * 8 / self.rate) if self.rate else time

    @property
    def paced(self):
        return self.high > 0 or bool(self.rate) or self.by_interval

    def sample(self):
        return self.low if self.low == self.high else self.rng.uniform(self.low, self.high)


class PacedLink(LocalLink):
    """A LocalLink whose PDUs wait for a connection event and take airtime (see the module docstring)."""

    def __init__(self, timing=None):
        super().__init__()
        self.timing = timing or LinkTiming()
        # (sender address, receiver address) -> loop time at which that direction's air is free.
        self._air_free_at = {}
        # (sender address, receiver address) -> bytes of the L2CAP PDU being handed over that already went
        # out as fragments of their own (see send_fragment).
        self._ahead = {}
        # (sender address, receiver address) -> when the current connection event must end (by interval).
        self._event_end = {}
        # Data PDUs handed to the link so far, and when the last one (data or control) arrives: a
        # controller that feeds host data into its assembler learns whether a PDU left, and when.
        self.data_pdus = 0
        self.last_arrival = 0.0
        self._advertisers = None
        # Controllers that may scan or initiate (stations); advertising goes only to them.
        self._listeners = []

    # -- Timing --

    def schedule(self, sender_address, receiver_address, length, octets, phy, deliver, connection=None):
        """Delivers `deliver()` once a PDU of `length` bytes has crossed from sender to receiver;
        returns the loop time it arrives. `connection` (the sender's side of the link) gives the
        connection events when the timing goes by interval."""
        loop = asyncio.get_running_loop()
        if not self.timing.paced:
            loop.call_soon(deliver)
            self.last_arrival = loop.time()
            return self.last_arrival
        key = (sender_address, receiver_address)
        now = loop.time()
        busy_until = self._air_free_at.get(key, 0.0)
        duration = self.timing.airtime(length, octets, phy)
        interval = getattr(connection, "ll_interval", None) if self.timing.by_interval else None
        if interval:
            # Connection events: anchors every interval from the connection's anchor. A PDU handed over
            # while the current event still runs (More Data) and fits before it must end goes in it;
            # otherwise it waits for the next anchor.
            event_end = self._event_end.get(key, 0.0)
            if busy_until > now and busy_until + duration <= event_end:
                start = busy_until
            else:
                anchor = getattr(connection, "ll_anchor", now)
                t = max(now, busy_until)
                start = anchor + math.ceil((t - anchor) / interval - 1e-9) * interval
                self._event_end[key] = start + interval - T_IFS
        else:
            # A PDU handed over while earlier ones are still on the air goes right behind them in the same
            # connection event (More Data); otherwise it waits for the next event.
            start = busy_until if busy_until > now else now + self.timing.sample()
        end = start + duration
        self._air_free_at[key] = end
        loop.call_at(end, deliver)
        self.last_arrival = end
        return end

    def send_fragment(self, sender_address, receiver_address, length, octets, phy, done, connection=None):
        """A fragment of an L2CAP PDU whose host has not handed over the rest yet: it crosses on its own
        (`done()` when it has) and the PDU's delivery (send_acl_data) then takes only the rest's airtime."""
        key = (sender_address, receiver_address)
        self._ahead[key] = self._ahead.get(key, 0) + length
        return self.schedule(sender_address, receiver_address, length, octets, phy, done, connection)

    def air_free_at(self, sender_address, receiver_address):
        """Loop time at which what was handed over from sender to receiver so far has arrived."""
        return self._air_free_at.get((sender_address, receiver_address), 0.0)

    def forget_fragments(self, sender_address, receiver_address):
        """The link went down with a PDU half handed over: its fragments are lost with it."""
        self._ahead.pop((sender_address, receiver_address), None)

    # -- Lookups --

    def add_controller(self, controller):
        super().add_controller(controller)
        self._advertisers = None
        if getattr(controller, "listens", True):
            self._listeners.append(controller)

    def remove_controller(self, controller):
        super().remove_controller(controller)
        self._advertisers = None
        if controller in self._listeners:
            self._listeners.remove(controller)

    def on_address_changed(self, controller):
        self._advertisers = None

    def controller_at(self, address):
        """The controller that uses `address` as its own (random or public), or None."""
        if self._advertisers is None:
            self._advertisers = {}
            for c in self.controllers:
                self._advertisers[(c.public_address.address_bytes, True)] = c
                self._advertisers[(c.random_address.address_bytes, False)] = c
        return self._advertisers.get((address.address_bytes, address.is_public))

    # -- LE PDUs --

    def send_acl_data(self, sender_controller, destination_address, transport, data):
        if transport != PhysicalTransport.LE:
            return super().send_acl_data(sender_controller, destination_address, transport, data)
        source_address = sender_controller.random_address
        # What already crossed as fragments of its own takes no more air.
        rest = max(0, len(data) - self._ahead.pop((source_address, destination_address), 0))
        destination = self.find_le_controller(destination_address)
        if destination is None:
            # Nobody there any more: the PDU is lost on the air, and it has left the sender.
            self.data_pdus += 1
            self.last_arrival = asyncio.get_running_loop().time()
            return
        connection = sender_controller.le_connections.get(destination_address)
        octets, phy = tx_parameters(connection)
        self.schedule(source_address, destination_address, rest, octets, phy,
                      lambda: destination.on_link_acl_data(source_address, transport, data), connection)
        self.data_pdus += 1

    def send_ll_control_pdu(self, sender_address, receiver_address, packet):
        receiver = self.find_le_controller(receiver_address)
        if receiver is None:
            logger.debug("LL control PDU for %s, which is gone: %s", receiver_address, packet)
            self.last_arrival = asyncio.get_running_loop().time()
            return
        size = LL_TERMINATE_IND if isinstance(packet, ll.TerminateInd) else LL_CONTROL_PDU
        sender = self.find_le_controller(sender_address)
        connection = sender.le_connections.get(receiver_address) if sender is not None else None
        self.schedule(sender_address, receiver_address, size, LL_MAX_OCTETS, PHY_1M,
                      lambda: receiver.on_ll_control_pdu(sender_address, packet), connection)

    def send_advertising_pdu(self, sender_controller, packet):
        if isinstance(packet, ll.ConnectInd):
            # The advertiser takes the first CONNECT_IND for this event and stops advertising; a later
            # initiator that answered the same event finds it gone (see StationController).
            target = self.controller_at(packet.advertiser_address)
            if target is not None and target is not sender_controller:
                target.on_ll_advertising_pdu(packet)
            return
        loop = asyncio.get_running_loop()
        for c in self._listeners:
            if c is not sender_controller and (c.le_scan_enable or c.pending_le_connection is not None):
                loop.call_soon(c.on_ll_advertising_pdu, packet)

    def has_listeners(self):
        return any(c.le_scan_enable or c.pending_le_connection is not None for c in self._listeners)


def tx_parameters(connection):
    """(octets, PHY) this side of `connection` transmits with."""
    if connection is None:
        return LL_DEFAULT_OCTETS, PHY_1M
    return getattr(connection, "ll_tx_octets", LL_DEFAULT_OCTETS), getattr(connection, "ll_tx_phy", PHY_1M)


@dataclasses.dataclass
class AuxAdvInd(ll.AdvExtInd):
    """ADV_EXT_IND with its AUX_ADV_IND (Vol 6 Part B 2.3.4), reduced to what matters here: connectable
    extended advertising whose data is on `secondary_phy` (PHY_1M, PHY_2M or PHY_CODED)."""

    secondary_phy: int = 1


PHY_CODED = 3


@dataclasses.dataclass
class PacedAdvertiser(LegacyAdvertiser):
    """Legacy advertising with advInterval in its real unit (0.625 ms) and advDelay (0-10 ms); with
    `extended_phy`, the same data as extended advertising on that secondary PHY instead."""

    rng: random.Random = dataclasses.field(default_factory=random.Random)
    # The first event after the first enable comes after this many seconds (devices powered on at
    # different moments); later enables advertise at once, as a controller does.
    first_delay: float = 0.0
    extended_phy: int | None = None

    def send_advertising_data(self):
        if self.extended_phy is None:
            return super().send_advertising_data()
        if self.enabled:
            self.controller.send_advertising_pdu(AuxAdvInd(advertiser_address=self.address, data=self.advertising_data,
                                                           sid=0, secondary_phy=self.extended_phy))

    def start(self):
        self.stop()
        self.enabled = True
        delay, self.first_delay = self.first_delay, 0.0
        self.timer_handle = asyncio.get_running_loop().call_later(delay, self._on_timer_fired)

    def _on_timer_fired(self):
        link = self.controller.link
        if not isinstance(link, PacedLink) or link.has_listeners():
            self.send_advertising_data()
        interval = max(self.advertising_interval_min, 0x20) * 0.000625 + self.rng.uniform(0, ADV_DELAY_MAX)
        self.timer_handle = asyncio.get_running_loop().call_later(interval, self._on_timer_fired)


class QuietHost(Host):
    """Bumble's host, without formatting each packet for a debug line nobody logs (as PacedController):
    for a device that moves bulk data, e.g. `Device(name=..., address=..., host=QuietHost(c, c))`."""

    def send_hci_packet(self, packet):
        if _host_logger.isEnabledFor(logging.DEBUG) or self.snooper:
            return super().send_hci_packet(packet)
        if self.hci_sink:
            self.hci_sink.on_packet(bytes(packet))

    def on_hci_packet(self, packet):
        if _host_logger.isEnabledFor(logging.DEBUG) or self.snooper:
            return super().on_hci_packet(packet)
        if isinstance(packet, hci.HCI_Event):
            self.on_hci_event_packet(packet)
        elif isinstance(packet, hci.HCI_AclDataPacket):
            self.on_hci_acl_data_packet(packet)
        else:
            super().on_hci_packet(packet)


class PacedController(Controller):
    """A Bumble controller with real timing on a PacedLink (see the module docstring)."""

    le_features = LE_FEATURES
    # The fleet's devices only advertise; stations scan and initiate (see PacedLink).
    listens = False
    supported_max_tx_octets = LL_MAX_OCTETS
    supported_max_tx_time = max_time(LL_MAX_OCTETS)
    supported_max_rx_octets = LL_MAX_OCTETS
    supported_max_rx_time = max_time(LL_MAX_OCTETS)

    def __init__(self, name, *, link, seed=1, **kwargs):
        super().__init__(name, link=link, **kwargs)
        self.rng = random.Random(f"{seed}/{name}")
        self.le_legacy_advertiser = PacedAdvertiser(self, rng=self.rng)
        # The masks a controller starts with (Vol 4 Part E 7.3.1, 7.8.1); Bumble starts at 0.
        self.event_mask = 0x00001FFFFFFFFFFF
        self.le_event_mask = 0x1F
        # Per handle: host ACL packets received that have not gone over the air yet.
        self._unsent_packets = {}
        self._terminating = set()
        # Per handle: a peripheral's LL_CONNECTION_PARAM_REQ waiting for this host's answer.
        self.pending_parameter_requests = {}

    @property
    def paced(self):
        return isinstance(self.link, PacedLink) and self.link.timing.paced

    def le_event_enabled(self, subevent):
        return bool(self.event_mask & EVENT_MASK_LE_META) and bool(self.le_event_mask & (1 << (subevent - 1)))

    # -- HCI in and out, without formatting each packet for a debug line nobody logs --
    # Bumble's controller builds that line (colours and the packet's text) for every packet whatever the
    # log level (about 15 % of the CPU of an upload, docs/benchmarks.md). The same work, minus that.

    def on_hci_packet(self, packet):
        if _controller_logger.isEnabledFor(logging.DEBUG):
            return super().on_hci_packet(packet)
        if isinstance(packet, hci.HCI_Command):
            self.on_hci_command_packet(packet)
        elif isinstance(packet, hci.HCI_AclDataPacket):
            self.on_hci_acl_data_packet(packet)
        elif isinstance(packet, hci.HCI_Event):
            self.on_hci_event_packet(packet)
        else:
            super().on_hci_packet(packet)

    def send_hci_packet(self, packet):
        if _controller_logger.isEnabledFor(logging.DEBUG):
            return super().send_hci_packet(packet)
        if self.host:
            asyncio.get_running_loop().call_soon(self.host.on_packet, bytes(packet))

    # -- ACL from the host: completed when it has gone over the air --

    def on_hci_acl_data_packet(self, packet):
        connection = self.find_le_connection_by_handle(packet.connection_handle)
        if connection is None and self.find_classic_connection_by_handle(packet.connection_handle) is None:
            # Data the host sent before it saw the Disconnection Complete: dropped, as a controller does.
            logger.debug("[%s] ACL data for handle 0x%04X, which has no link", self.name, packet.connection_handle)
            return
        if connection is None or not self.paced:
            return super().on_hci_acl_data_packet(packet)
        handle = connection.handle
        self._unsent_packets[handle] = self._unsent_packets.get(handle, 0) + 1
        before = self.link.data_pdus
        connection.assembler.feed_packet(packet)
        if self.link.data_pdus != before:
            # The last packet of a PDU: it crosses with what is left of the PDU.
            asyncio.get_running_loop().call_at(self.link.last_arrival, self._packets_completed, connection, 1)
        else:
            # A packet of a PDU the host has not finished: it goes out on its own, as a controller does.
            octets, phy = tx_parameters(connection)
            self.link.send_fragment(self.random_address, connection.peer_address, len(packet.data), octets, phy,
                                    lambda: self._packets_completed(connection, 1), connection)

    def _packets_completed(self, connection, count):
        # After a disconnection the host counts the link's packets as flushed (Vol 4 Part E 4.3).
        if self.le_connections.get(connection.peer_address) is connection:
            left = self._unsent_packets.get(connection.handle, 0) - count
            if left > 0:
                self._unsent_packets[connection.handle] = left
            else:
                self._unsent_packets.pop(connection.handle, None)
            self.send_hci_packet(hci.HCI_Number_Of_Completed_Packets_Event(
                connection_handles=[connection.handle], num_completed_packets=[count]))

    # -- ACL from the link --

    fragments_to_host = False

    def on_link_acl_data(self, sender_address, transport, data):
        if transport != PhysicalTransport.LE:
            return super().on_link_acl_data(sender_address, transport, data)
        connection = self.le_connections.get(sender_address)
        if connection is None:
            # Data in flight when the link went down is lost, as on air.
            logger.debug("[%s] ACL data from %s after its link went down", self.name, sender_address)
            return
        if not self.fragments_to_host:
            return super().on_link_acl_data(sender_address, transport, data)
        # One HCI ACL packet per LL PDU received, as a real controller forwards them.
        octets = getattr(connection, "ll_rx_octets", LL_DEFAULT_OCTETS)
        for offset in range(0, len(data), octets):
            chunk = data[offset:offset + octets]
            pb = hci.HCI_ACL_PB_FIRST_FLUSHABLE if offset == 0 else hci.HCI_ACL_PB_CONTINUATION
            self.send_hci_packet(hci.HCI_AclDataPacket(connection.handle, pb, 0, len(chunk), chunk))

    # -- LL control --

    def on_le_disconnected(self, connection, reason):
        if self.le_connections.get(connection.peer_address) is not connection:
            return
        self._unsent_packets.pop(connection.handle, None)
        self._terminating.discard(connection.handle)
        if isinstance(self.link, PacedLink):
            self.link.forget_fragments(self.random_address, connection.peer_address)
        super().on_le_disconnected(connection, reason)

    def on_hci_disconnect_command(self, command):
        connection = self.find_le_connection_by_handle(command.connection_handle)
        if connection is None or not self.link:
            return super().on_hci_disconnect_command(command)
        if connection.handle in self._terminating:
            self._send_hci_command_status(hci.HCI_ErrorCode.COMMAND_DISALLOWED_ERROR, command.op_code)
            return None
        self._send_hci_command_status(hci.HCI_COMMAND_STATUS_PENDING, command.op_code)
        self._terminating.add(connection.handle)
        connection.send_ll_control_pdu(ll.TerminateInd(command.reason))
        # The link is down for this side once the peer has acknowledged LL_TERMINATE_IND.
        asyncio.get_running_loop().call_at(self.link.last_arrival, self.on_le_disconnected,
                                           connection, LOCAL_HOST_TERMINATED)
        return None

    # -- Data length (Vol 4 Part E 7.8.33, Vol 6 Part B 5.1.9) --

    def on_hci_le_set_data_length_command(self, command):
        connection = self.find_le_connection_by_handle(command.connection_handle)
        if connection is None:
            status = hci.HCI_ErrorCode.UNKNOWN_CONNECTION_IDENTIFIER_ERROR
        elif not (0x1B <= command.tx_octets <= 0xFB and 0x148 <= command.tx_time <= 0x4290):
            status = hci.HCI_ErrorCode.INVALID_COMMAND_PARAMETERS_ERROR
        else:
            status = hci.HCI_ErrorCode.SUCCESS
            self.update_data_length(connection, command.tx_octets)
        return hci.HCI_StatusAndConnectionHandleReturnParameters(
            status=status, connection_handle=command.connection_handle)

    def update_data_length(self, connection, tx_octets):
        """LL_LENGTH_REQ to the peer and LL_LENGTH_RSP back; each side then sends with at most what
        the other receives (251 here) and reports a change to its host."""
        peer = self.link.find_le_controller(connection.peer_address)
        if peer is None:
            return
        ours = min(tx_octets, LL_MAX_OCTETS)
        octets, phy = tx_parameters(connection)

        def at_peer():
            peer_connection = peer.le_connections.get(connection.self_address)
            if peer_connection is None:
                return
            theirs = min(peer.suggested_max_tx_octets, LL_MAX_OCTETS)
            set_data_length(peer, peer_connection, tx=theirs, rx=ours)
            p_octets, p_phy = tx_parameters(peer_connection)
            self.link.schedule(connection.peer_address, connection.self_address, LL_LENGTH_PDU, p_octets, p_phy,
                               lambda: back_here(theirs), peer_connection)

        def back_here(theirs):
            if self.le_connections.get(connection.peer_address) is connection:
                set_data_length(self, connection, tx=ours, rx=theirs)

        self.link.schedule(connection.self_address, connection.peer_address, LL_LENGTH_PDU, octets, phy, at_peer, connection)

    # -- RSSI (Vol 4 Part E 7.5.4) --
    # Bumble's controller does not know HCI Read RSSI; a real one answers it for every link. The host
    # connects by accept list only where it can read a link's RSSI (the report keeps one per device).
    # The fleet's radio has no path loss, so the value is the fixed -50 dBm of its advertising reports.

    def on_hci_read_rssi_command(self, command):
        connection = self.find_le_connection_by_handle(command.handle)
        if connection is None:
            return hci.HCI_Read_RSSI_ReturnParameters(
                status=hci.HCI_ErrorCode.UNKNOWN_CONNECTION_IDENTIFIER_ERROR, handle=command.handle, rssi=0)
        return hci.HCI_Read_RSSI_ReturnParameters(status=hci.HCI_ErrorCode.SUCCESS, handle=connection.handle, rssi=-50)

    # -- PHY (Vol 4 Part E 7.8.47-49, Vol 6 Part B 5.1.10) --

    def on_hci_le_read_phy_command(self, command):
        connection = self.find_le_connection_by_handle(command.connection_handle)
        if connection is None:
            return hci.HCI_LE_Read_PHY_ReturnParameters(
                status=hci.HCI_ErrorCode.UNKNOWN_CONNECTION_IDENTIFIER_ERROR,
                connection_handle=command.connection_handle, tx_phy=PHY_1M, rx_phy=PHY_1M)
        return hci.HCI_LE_Read_PHY_ReturnParameters(
            status=hci.HCI_ErrorCode.SUCCESS, connection_handle=connection.handle,
            tx_phy=getattr(connection, "ll_tx_phy", PHY_1M), rx_phy=getattr(connection, "ll_rx_phy", PHY_1M))

    def on_hci_le_set_phy_command(self, command):
        connection = self.find_le_connection_by_handle(command.connection_handle)
        if connection is None:
            self._send_hci_command_status(hci.HCI_ErrorCode.UNKNOWN_CONNECTION_IDENTIFIER_ERROR, command.op_code)
            return None
        current_tx = getattr(connection, "ll_tx_phy", PHY_1M)
        current_rx = getattr(connection, "ll_rx_phy", PHY_1M)
        tx = preferred_phy(command.all_phys & 0x01, command.tx_phys, current_tx)
        rx = preferred_phy(command.all_phys & 0x02, command.rx_phys, current_rx)
        if tx is None or rx is None:
            # A preference that names only PHYs this controller lacks (coded).
            self._send_hci_command_status(hci.HCI_ErrorCode.UNSUPPORTED_FEATURE_OR_PARAMETER_VALUE_ERROR,
                                          command.op_code)
            return None
        self._send_hci_command_status(hci.HCI_COMMAND_STATUS_PENDING, command.op_code)
        self.update_phy(connection, tx, rx)
        return None

    def update_phy(self, connection, tx, rx):
        """LL_PHY_REQ, LL_PHY_RSP, LL_PHY_UPDATE_IND; then both sides use the new PHYs. The initiating
        host always hears LE PHY Update Complete, the peer's only when something changed."""
        peer = self.link.find_le_controller(connection.peer_address)
        if peer is None:
            return

        def send(src, dst, size, conn, then):
            octets, phy = tx_parameters(conn)
            self.link.schedule(src, dst, size, octets, phy, then, conn)

        def at_peer():
            peer_connection = peer.le_connections.get(connection.self_address)
            if peer_connection is not None:
                send(connection.peer_address, connection.self_address, LL_PHY_PDU, peer_connection, back_here)

        def back_here():
            if self.le_connections.get(connection.peer_address) is connection:
                send(connection.self_address, connection.peer_address, LL_PHY_UPDATE_IND, connection, instant)

        def instant():
            # Both sides switch at the instant the LL_PHY_UPDATE_IND names.
            peer_connection = peer.le_connections.get(connection.self_address)
            if peer_connection is None or self.le_connections.get(connection.peer_address) is not connection:
                return
            set_phy(peer, peer_connection, tx=rx, rx=tx, always_report=False)
            set_phy(self, connection, tx=tx, rx=rx, always_report=True)

        send(connection.self_address, connection.peer_address, LL_PHY_PDU, connection, at_peer)

    # -- Connection parameters (Vol 4 Part E 7.8.18, 7.8.31-32; Vol 6 Part B 5.1.1, 5.1.7) --

    def on_le_connect_ind(self, packet):
        # Bumble's peripheral reports a fixed 12.5 ms interval and 100 ms timeout to its host: report the
        # CONNECT_IND's.
        self._connect_ind = packet
        try:
            super().on_le_connect_ind(packet)
        finally:
            self._connect_ind = None

    def send_hci_packet(self, packet):
        connect_ind = getattr(self, "_connect_ind", None)
        if connect_ind is not None and isinstance(packet, hci.HCI_LE_Connection_Complete_Event):
            packet.connection_interval = connect_ind.interval
            packet.peripheral_latency = connect_ind.latency
            packet.supervision_timeout = connect_ind.timeout
        super().send_hci_packet(packet)

    def on_hci_le_connection_update_command(self, command):
        connection = self.find_le_connection_by_handle(command.connection_handle)
        if connection is None:
            self._send_hci_command_status(hci.HCI_ErrorCode.UNKNOWN_CONNECTION_IDENTIFIER_ERROR, command.op_code)
            return None
        self._send_hci_command_status(hci.HCI_COMMAND_STATUS_PENDING, command.op_code)
        if connection.role == hci.Role.PERIPHERAL:
            # A peripheral's host asks the central (the Connection Parameters Request procedure).
            connection.send_ll_control_pdu(ConnectionParamReq(
                interval_min=command.connection_interval_min, interval_max=command.connection_interval_max,
                latency=command.max_latency, timeout=command.supervision_timeout))
            return None
        # The central picks the shortest interval it was allowed, as when it connects.
        self.update_connection(connection, command.connection_interval_min, command.max_latency, command.supervision_timeout)
        return None

    def update_connection(self, connection, interval, latency, timeout):
        """LL_CONNECTION_UPDATE_IND to the peer; at its instant both sides run at the new interval (a
        new anchor), and each host hears LE Connection Update Complete."""
        connection.send_ll_control_pdu(ll.ConnectionUpdateInd(interval=interval, latency=latency, timeout=timeout))
        peer = self.link.find_le_controller(connection.peer_address)

        def instant():
            if self.le_connections.get(connection.peer_address) is not connection:
                return
            now = asyncio.get_running_loop().time()
            for c in (connection, peer.le_connections.get(connection.self_address) if peer else None):
                if c is not None:
                    c.ll_interval = interval * 0.00125
                    c.ll_anchor = now
                    c.ll_latency = latency
                    c.ll_timeout = timeout
            self.send_hci_packet(hci.HCI_LE_Connection_Update_Complete_Event(
                status=hci.HCI_ErrorCode.SUCCESS, connection_handle=connection.handle, connection_interval=interval,
                peripheral_latency=latency, supervision_timeout=timeout))

        asyncio.get_running_loop().call_at(self.link.last_arrival, instant)

    def on_ll_control_pdu(self, sender_address, packet):
        connection = self.le_connections.get(sender_address)
        if connection is None:
            # An LL_TERMINATE_IND crossing ours, or a PDU for a link that is gone.
            logger.debug("[%s] LL control PDU from %s without a link: %s", self.name, sender_address, packet)
            return
        if isinstance(packet, ConnectionParamReq):
            self.on_connection_param_req(connection, packet)
        elif isinstance(packet, ll.RejectExtInd) and packet.reject_opcode == ll.ControlPdu.Opcode.LL_CONNECTION_PARAM_REQ:
            # The central refused this side's request: its host hears the update fail.
            self.send_hci_packet(hci.HCI_LE_Connection_Update_Complete_Event(
                status=packet.error_code, connection_handle=connection.handle,
                connection_interval=int(getattr(connection, "ll_interval", 0) / 0.00125),
                peripheral_latency=getattr(connection, "ll_latency", 0), supervision_timeout=getattr(connection, "ll_timeout", 0)))
        else:
            super().on_ll_control_pdu(sender_address, packet)

    def on_connection_param_req(self, connection, req):
        """The central's side of a peripheral's request: its host decides (LE Remote Connection
        Parameter Request) where it unmasked the event; otherwise the controller accepts."""
        if self.le_event_enabled(LE_REMOTE_CONNECTION_PARAMETER_REQUEST):
            self.pending_parameter_requests[connection.handle] = req
            self.send_hci_packet(hci.HCI_LE_Remote_Connection_Parameter_Request_Event(
                connection_handle=connection.handle, interval_min=req.interval_min, interval_max=req.interval_max,
                max_latency=req.latency, timeout=req.timeout))
        else:
            self.update_connection(connection, req.interval_min, req.latency, req.timeout)

    def on_hci_le_remote_connection_parameter_request_reply_command(self, command):
        connection = self.find_le_connection_by_handle(command.connection_handle)
        if connection is None or self.pending_parameter_requests.pop(command.connection_handle, None) is None:
            return hci.HCI_StatusAndConnectionHandleReturnParameters(
                status=hci.HCI_ErrorCode.UNKNOWN_CONNECTION_IDENTIFIER_ERROR, connection_handle=command.connection_handle)
        self.update_connection(connection, command.interval_min, command.max_latency, command.timeout)
        return hci.HCI_StatusAndConnectionHandleReturnParameters(status=hci.HCI_ErrorCode.SUCCESS,
                                                                connection_handle=command.connection_handle)

    def on_hci_le_remote_connection_parameter_request_negative_reply_command(self, command):
        connection = self.find_le_connection_by_handle(command.connection_handle)
        if connection is None or self.pending_parameter_requests.pop(command.connection_handle, None) is None:
            return hci.HCI_StatusAndConnectionHandleReturnParameters(
                status=hci.HCI_ErrorCode.UNKNOWN_CONNECTION_IDENTIFIER_ERROR, connection_handle=command.connection_handle)
        connection.send_ll_control_pdu(ll.RejectExtInd(reject_opcode=ll.ControlPdu.Opcode.LL_CONNECTION_PARAM_REQ,
                                                       error_code=command.reason))
        return hci.HCI_StatusAndConnectionHandleReturnParameters(status=hci.HCI_ErrorCode.SUCCESS,
                                                                connection_handle=command.connection_handle)


@dataclasses.dataclass
class ConnectionParamReq(ll.ControlPdu):
    """LL_CONNECTION_PARAM_REQ (Vol 6 Part B 2.4.2.16), with the values the procedure uses here."""
    opcode = ll.ControlPdu.Opcode.LL_CONNECTION_PARAM_REQ

    interval_min: int
    interval_max: int
    latency: int
    timeout: int


def preferred_phy(no_preference, phys, current):
    """The PHY to use for one direction: 2M if preferred, else 1M if preferred; None when only PHYs we
    lack are named; the current one when the host has no preference."""
    if no_preference:
        return current
    if phys & PHY_BITS[PHY_2M]:
        return PHY_2M
    if phys & PHY_BITS[PHY_1M]:
        return PHY_1M
    return None


def set_data_length(controller, connection, tx, rx):
    if (getattr(connection, "ll_tx_octets", LL_DEFAULT_OCTETS), getattr(connection, "ll_rx_octets", LL_DEFAULT_OCTETS)) == (tx, rx):
        return
    connection.ll_tx_octets = tx
    connection.ll_rx_octets = rx
    if controller.le_event_enabled(LE_DATA_LENGTH_CHANGE):
        controller.send_hci_packet(hci.HCI_LE_Data_Length_Change_Event(
            connection_handle=connection.handle,
            max_tx_octets=tx, max_tx_time=max_time(tx),
            max_rx_octets=rx, max_rx_time=max_time(rx)))


def set_phy(controller, connection, tx, rx, always_report):
    changed = (getattr(connection, "ll_tx_phy", PHY_1M), getattr(connection, "ll_rx_phy", PHY_1M)) != (tx, rx)
    connection.ll_tx_phy = tx
    connection.ll_rx_phy = rx
    if (changed or always_report) and controller.le_event_enabled(LE_PHY_UPDATE_COMPLETE):
        controller.send_hci_packet(hci.HCI_LE_PHY_Update_Complete_Event(
            status=hci.HCI_ErrorCode.SUCCESS, connection_handle=connection.handle, tx_phy=tx, rx_phy=rx))


class StationController(PacedController):
    """The controller a host under test drives (see the module docstring).

    `fal_size`: Filter Accept List entries. `max_links`: links held at once (None: no limit).
    `max_links_at`: where a connection beyond the limit is refused: "create" (the Command Status of LE
    Create Connection) or "complete" (the Connection Complete). `scan_while_initiating`: what LE Read
    Supported States says about scanning while initiating, and whether the combination is allowed.
    """

    listens = True
    fragments_to_host = True
    # A station controller starts the data length update on every new link when its host asked for a
    # larger default (LE Write Suggested Default Data Length), as real controllers do; the fleet's
    # devices leave it to the central.
    autonomous_data_length = True

    def __init__(self, name, *, fal_size=8, max_links=None, max_links_at="create", scan_while_initiating=True,
                 faults=(), acl_buffers=None, extended=False, **kwargs):
        super().__init__(name, **kwargs)
        # Extended advertising: the feature, the commands, and a scan that runs with them.
        self.extended = extended
        self.extended_scan = False
        if extended:
            self.le_features = LE_FEATURES | hci.LeFeatureMask.LE_EXTENDED_ADVERTISING | hci.LeFeatureMask.LE_CODED_PHY
            self.supported_commands = set(Controller.supported_commands) | {
                hci.HCI_LE_SET_EXTENDED_SCAN_PARAMETERS_COMMAND, hci.HCI_LE_SET_EXTENDED_SCAN_ENABLE_COMMAND,
                hci.HCI_LE_EXTENDED_CREATE_CONNECTION_COMMAND}
        # [(kind, n)]: after the station's nth connection, `hardware-error` or `restart` (see fail()).
        self.faults = list(faults)
        self.connections_made = 0
        # Called to close the host's connection (set by whoever serves the host: bumble_fleet.py).
        self.close_host = None
        if acl_buffers is not None:
            self.le_acl_data_packet_length, self.total_num_le_acl_data_packets = acl_buffers
        self.filter_accept_list_size = fal_size
        self.max_links = max_links
        self.max_links_at = max_links_at
        self.scan_while_initiating = scan_while_initiating
        states = int.from_bytes(Controller.le_states, "little")
        states = states | STATES_SCAN_WHILE_INITIATING if scan_while_initiating else states & ~STATES_SCAN_WHILE_INITIATING
        self.le_states = states.to_bytes(8, "little")
        self.accept_list = []  # (is_public, address bytes), in the order added
        self.scan_started_at = 0.0
        self.initiating_since = 0.0
        self.reported = set()  # duplicate filter: (address bytes, event type) since scanning started

    # -- Reset (Vol 4 Part E 7.3.2): nothing survives it --

    def on_hci_reset_command(self, command):
        self.drop_everything()
        return super().on_hci_reset_command(command)

    def drop_everything(self):
        """What Reset (or a crash) clears: links (their peers see them end), the pending connection,
        scanning, the Filter Accept List, masks and defaults."""
        for connection in list(self.le_connections.values()):
            connection.send_ll_control_pdu(ll.TerminateInd(hci.HCI_ErrorCode.REMOTE_USER_TERMINATED_CONNECTION_ERROR))
            self.le_connections.pop(connection.peer_address, None)
        self.pending_parameter_requests.clear()
        self._unsent_packets.clear()
        self._terminating.clear()
        self.pending_le_connection = None
        self.le_scan_enable = False
        self.le_scan_type = 0
        self.le_scan_interval = self.le_scan_window = 0x10
        self.le_scanning_filter_policy = 0
        self.filter_duplicates = False
        self.reported.clear()
        self.accept_list.clear()
        self.suggested_max_tx_octets = LL_DEFAULT_OCTETS
        self.suggested_max_tx_time = 0x0148
        self.event_mask = 0x00001FFFFFFFFFFF
        self.le_event_mask = 0x1F

    # -- Faults on cue --

    def fail(self, kind):
        """`hardware-error`: the controller crashes — its links are gone (the devices see them end) — and
        says so with a Hardware Error event (Vol 4 Part E 7.7.16); its host must reset it.
        `restart`: the controller restarts — links gone, its connection to the host closed — and takes a
        new connection on the same port, as a restarting HCI bridge or TCP peer does."""
        logger.warning("[%s] fault: %s after %d connection(s)", self.name, kind, self.connections_made)
        self.drop_everything()
        if kind == "hardware-error":
            self.send_hci_packet(RawPacket(bytes([0x04, 0x10, 0x01, 0x01])))
        elif kind == "restart" and self.close_host is not None:
            self.close_host()

    def connection_made(self):
        self.connections_made += 1
        for kind, n in list(self.faults):
            if n == self.connections_made:
                self.faults.remove((kind, n))
                # A moment later: the link is in use when the controller goes.
                asyncio.get_running_loop().call_later(0.05, self.fail, kind)

    # -- What the controller says about itself --

    def on_hci_le_read_supported_states_command(self, _command):
        return hci.HCI_LE_Read_Supported_States_ReturnParameters(status=hci.HCI_ErrorCode.SUCCESS,
                                                                 le_states=self.le_states)

    # -- Filter Accept List (Vol 4 Part E 7.8.14-17, Vol 6 Part B 4.3.1) --

    def accept_list_in_use(self):
        """The list may not change while scanning or initiating uses it."""
        pending = self.pending_le_connection
        initiating = pending is not None and initiator_filter_policy(pending) == 1
        scanning = self.le_scan_enable and self.le_scanning_filter_policy in (1, 3)
        return initiating or scanning

    def on_hci_le_read_filter_accept_list_size_command(self, _command):
        return hci.HCI_LE_Read_Filter_Accept_List_Size_ReturnParameters(
            status=hci.HCI_ErrorCode.SUCCESS, filter_accept_list_size=self.filter_accept_list_size)

    def on_hci_le_clear_filter_accept_list_command(self, _command):
        if self.accept_list_in_use():
            return hci.HCI_StatusReturnParameters(hci.HCI_ErrorCode.COMMAND_DISALLOWED_ERROR)
        self.accept_list.clear()
        return hci.HCI_StatusReturnParameters(hci.HCI_ErrorCode.SUCCESS)

    def on_hci_le_add_device_to_filter_accept_list_command(self, command):
        if self.accept_list_in_use():
            return hci.HCI_StatusReturnParameters(hci.HCI_ErrorCode.COMMAND_DISALLOWED_ERROR)
        entry = accept_list_entry(command.address_type, command.address)
        if entry in self.accept_list:
            return hci.HCI_StatusReturnParameters(hci.HCI_ErrorCode.SUCCESS)
        if len(self.accept_list) >= self.filter_accept_list_size:
            return hci.HCI_StatusReturnParameters(hci.HCI_ErrorCode.MEMORY_CAPACITY_EXCEEDED_ERROR)
        self.accept_list.append(entry)
        return hci.HCI_StatusReturnParameters(hci.HCI_ErrorCode.SUCCESS)

    def on_hci_le_remove_device_from_filter_accept_list_command(self, command):
        if self.accept_list_in_use():
            return hci.HCI_StatusReturnParameters(hci.HCI_ErrorCode.COMMAND_DISALLOWED_ERROR)
        entry = accept_list_entry(command.address_type, command.address)
        if entry in self.accept_list:
            self.accept_list.remove(entry)
        # Removing an absent entry succeeds (the spec names no error; NimBLE and Bumble do the same).
        return hci.HCI_StatusReturnParameters(hci.HCI_ErrorCode.SUCCESS)

    def on_accept_list(self, address):
        return (address.is_public, address.address_bytes) in self.accept_list

    # -- Scanning (Vol 4 Part E 7.8.10-11) --

    def on_hci_le_set_extended_scan_parameters_command(self, command):
        if not self.extended:
            return hci.HCI_StatusReturnParameters(hci.HCI_ErrorCode.UNKNOWN_HCI_COMMAND_ERROR)
        # The LE 1M entry (primary advertising on LE 1M; a coded one is heard as well here).
        self.le_scan_type = command.scan_types[0] if command.scan_types else 0
        self.le_scan_interval = command.scan_intervals[0] if command.scan_intervals else 0x10
        self.le_scan_window = command.scan_windows[0] if command.scan_windows else 0x10
        self.le_scanning_filter_policy = command.scanning_filter_policy
        return hci.HCI_StatusReturnParameters(hci.HCI_ErrorCode.SUCCESS)

    def on_hci_le_set_extended_scan_enable_command(self, command):
        if not self.extended:
            return hci.HCI_StatusReturnParameters(hci.HCI_ErrorCode.UNKNOWN_HCI_COMMAND_ERROR)
        return self.enable_scan(bool(command.enable), bool(command.filter_duplicates), extended=True)

    def on_hci_le_set_scan_enable_command(self, command):
        return self.enable_scan(bool(command.le_scan_enable), bool(command.filter_duplicates), extended=False)

    def enable_scan(self, enable, filter_duplicates, extended):
        if enable and not self.scan_while_initiating and self.pending_le_connection is not None:
            return hci.HCI_StatusReturnParameters(hci.HCI_ErrorCode.COMMAND_DISALLOWED_ERROR)
        if enable and not self.le_scan_enable:
            self.scan_started_at = asyncio.get_running_loop().time()
            self.reported.clear()
        self.le_scan_enable = enable
        self.extended_scan = enable and extended
        self.filter_duplicates = filter_duplicates
        return hci.HCI_StatusReturnParameters(hci.HCI_ErrorCode.SUCCESS)

    def on_advertising_pdu(self, pdu):
        extended = isinstance(pdu, AuxAdvInd)
        if not isinstance(pdu, ll.AdvInd) and not extended:
            return super().on_advertising_pdu(pdu)
        if extended and not self.extended:
            return  # a controller without extended advertising does not follow the aux pointer
        now = asyncio.get_running_loop().time()
        # A legacy scan hears legacy advertising only; an extended scan hears both.
        if self.le_scan_enable and (self.extended_scan or not extended) and \
                in_window(now - self.scan_started_at, self.le_scan_interval, self.le_scan_window):
            self.report(pdu)
        pending = self.pending_le_connection
        if pending is None or not in_window(now - self.initiating_since, *initiating_window(pending)):
            return
        if extended and not isinstance(pending, hci.HCI_LE_Extended_Create_Connection_Command):
            return  # LE Create Connection connects to legacy advertising only
        if initiator_filter_policy(pending) == 1:
            wanted = self.on_accept_list(pdu.advertiser_address)
        else:
            wanted = pdu.advertiser_address == pending.peer_address
        if wanted:
            self.create_le_connection(pdu.advertiser_address, phy=pdu.secondary_phy if extended else PHY_1M)

    def report(self, pdu):
        address = pdu.advertiser_address
        # Undirected advertising: policies 2 and 3 filter like 0 and 1.
        if self.le_scanning_filter_policy in (1, 3) and not self.on_accept_list(address):
            return
        kinds = [(hci.HCI_LE_Advertising_Report_Event.EventType.ADV_IND, pdu.data)]
        if self.le_scan_type == 1 and not isinstance(pdu, AuxAdvInd):
            # Active: a SCAN_REQ, answered by the advertiser's scan response.
            advertiser = self.link.controller_at(address)
            response = advertiser.le_legacy_advertiser.scan_response_data if advertiser else b""
            kinds.append((hci.HCI_LE_Advertising_Report_Event.EventType.SCAN_RSP, response))
        for event_type, data in kinds:
            if self.filter_duplicates:
                key = (address.address_bytes, event_type)
                if key in self.reported:
                    continue
                self.reported.add(key)
            if self.extended_scan:
                self.send_hci_packet(extended_report(pdu, event_type, data))
            else:
                self.send_hci_packet(hci.HCI_LE_Advertising_Report_Event([hci.HCI_LE_Advertising_Report_Event.Report(
                    event_type=event_type, address_type=address.address_type, address=address, data=data, rssi=-50)]))

    # -- Connecting (Vol 4 Part E 7.8.12-13) --

    def central_links(self):
        return sum(1 for c in self.le_connections.values() if c.role == hci.Role.CENTRAL)

    def on_hci_le_create_connection_command(self, command):
        if self.pending_le_connection is not None:
            status = hci.HCI_ErrorCode.COMMAND_DISALLOWED_ERROR
        elif self.le_scan_enable and not self.scan_while_initiating:
            status = hci.HCI_ErrorCode.COMMAND_DISALLOWED_ERROR
        elif command.initiator_filter_policy == 0 and command.peer_address in self.le_connections:
            status = hci.HCI_ErrorCode.CONNECTION_ALREADY_EXISTS_ERROR
        elif self.max_links is not None and self.max_links_at == "create" and self.central_links() >= self.max_links:
            status = hci.HCI_ErrorCode.CONNECTION_LIMIT_EXCEEDED_ERROR
        else:
            status = hci.HCI_COMMAND_STATUS_PENDING
            self.pending_le_connection = command
            self.initiating_since = asyncio.get_running_loop().time()
        self._send_hci_command_status(status, command.op_code)
        return None

    def on_hci_le_extended_create_connection_command(self, command):
        if not self.extended:
            # Not in this controller's supported commands: its hosts use LE Create Connection.
            self._send_hci_command_status(hci.HCI_ErrorCode.UNKNOWN_HCI_COMMAND_ERROR, command.op_code)
            return None
        return self.on_hci_le_create_connection_command(command)

    def on_hci_le_create_connection_cancel_command(self, _command):
        # Bumble answers success and leaves the connection pending; a controller ends it with a
        # Connection Complete (Unknown Connection Identifier) after the Command Complete.
        pending = self.pending_le_connection
        if pending is None:
            return hci.HCI_StatusReturnParameters(hci.HCI_ErrorCode.COMMAND_DISALLOWED_ERROR)
        self.pending_le_connection = None
        asyncio.get_running_loop().call_soon(
            self.send_connection_complete, hci.HCI_ErrorCode.UNKNOWN_CONNECTION_IDENTIFIER_ERROR, 0,
            pending.peer_address, 0, 0, 0)
        return hci.HCI_StatusReturnParameters(hci.HCI_ErrorCode.SUCCESS)

    def send_connection_complete(self, status, handle, peer_address, interval, latency, timeout):
        """LE Enhanced Connection Complete when the host unmasked it, else LE Connection Complete."""
        if self.le_event_enabled(LE_ENHANCED_CONNECTION_COMPLETE):
            event = hci.HCI_LE_Enhanced_Connection_Complete_Event(
                status=status, connection_handle=handle, role=hci.Role.CENTRAL,
                peer_address_type=peer_address.address_type, peer_address=peer_address,
                local_resolvable_private_address=hci.Address.ANY, peer_resolvable_private_address=hci.Address.ANY,
                connection_interval=interval, peripheral_latency=latency, supervision_timeout=timeout,
                central_clock_accuracy=0)
        elif self.le_event_enabled(LE_CONNECTION_COMPLETE):
            event = hci.HCI_LE_Connection_Complete_Event(
                status=status, connection_handle=handle, role=hci.Role.CENTRAL,
                peer_address_type=peer_address.address_type, peer_address=peer_address,
                connection_interval=interval, peripheral_latency=latency, supervision_timeout=timeout,
                central_clock_accuracy=0)
        else:
            return
        self.send_hci_packet(event)

    def create_le_connection(self, peer_address, phy=PHY_1M):
        """Answers `peer_address`'s advertising event with a CONNECT_IND (AUX_CONNECT_REQ on `phy` for
        extended advertising; replaces Bumble's, which connects to the command's peer address whatever
        the filter policy)."""
        pending = self.pending_le_connection
        self.pending_le_connection = None
        interval, latency, timeout = connection_parameters(pending)
        if self.max_links is not None and self.central_links() >= self.max_links:
            # max_links_at == "complete": accepted, then refused when the link would be made.
            self.send_connection_complete(hci.HCI_ErrorCode.CONNECTION_LIMIT_EXCEEDED_ERROR, 0, peer_address, 0, 0, 0)
            return
        self_address = self.public_address if pending.own_address_type == hci.OwnAddressType.PUBLIC else self.random_address
        connection = Connection(controller=self, handle=self.allocate_connection_handle(), role=hci.Role.CENTRAL,
                                self_address=self_address, peer_address=peer_address, link=self.link,
                                transport=PhysicalTransport.LE,
                                link_type=hci.HCI_Connection_Complete_Event.LinkType.ACL)
        self.le_connections[peer_address] = connection
        advertiser = self.link.controller_at(peer_address)
        won = False
        if advertiser is not None and advertiser.le_legacy_advertiser.enabled:
            before = advertiser.le_connections.get(self_address)
            self.send_advertising_pdu(ll.ConnectInd(initiator_address=self_address, advertiser_address=peer_address,
                                                    interval=interval, latency=latency, timeout=timeout))
            after = advertiser.le_connections.get(self_address)
            won = after is not None and after is not before
        self.send_connection_complete(hci.HCI_ErrorCode.SUCCESS, connection.handle, peer_address, interval, latency,
                                      timeout)
        if won:
            # Connection events from now on, every interval (both sides; see LinkTiming.by_interval). A
            # connection made from an AUX_ADV_IND starts on its PHY.
            now = asyncio.get_running_loop().time()
            for c in (connection, after):
                c.ll_interval = interval * 0.00125
                c.ll_anchor = now
                c.ll_latency = latency
                c.ll_timeout = timeout
                if phy != PHY_1M:
                    c.ll_tx_phy = c.ll_rx_phy = phy
            self.connection_made()
        if not won:
            # Another initiator's CONNECT_IND for the same event reached the device first: this side
            # believes it is connected until six connection events pass without an answer (Vol 6
            # Part B 4.5.2), then reports Connection Failed To Be Established.
            asyncio.get_running_loop().call_later(6 * interval * 0.00125, self.on_le_disconnected, connection,
                                                  FAILED_TO_BE_ESTABLISHED)
            return
        if self.autonomous_data_length and self.suggested_max_tx_octets > LL_DEFAULT_OCTETS:
            self.update_data_length(connection, self.suggested_max_tx_octets)


def initiator_filter_policy(command):
    return getattr(command, "initiator_filter_policy", 0)


def initiating_window(command):
    """(scan interval, scan window) of LE Create Connection or (its first PHY's) LE Extended Create Connection."""
    if isinstance(command, hci.HCI_LE_Extended_Create_Connection_Command):
        return command.scan_intervals[0], command.scan_windows[0]
    return command.le_scan_interval, command.le_scan_window


def connection_parameters(command):
    """(interval min, latency, supervision timeout) of either create command."""
    if isinstance(command, hci.HCI_LE_Extended_Create_Connection_Command):
        return command.connection_interval_mins[0], command.max_latencies[0], command.supervision_timeouts[0]
    return command.connection_interval_min, command.max_latency, command.supervision_timeout


def extended_report(pdu, event_type, data):
    """An LE Extended Advertising Report of `pdu` (Vol 4 Part E 7.7.65.13): legacy advertising with the
    legacy bit, extended with its secondary PHY."""
    address = pdu.advertiser_address
    if isinstance(pdu, AuxAdvInd):
        kind, secondary, sid = 0x01, pdu.secondary_phy, 0   # connectable, extended
    elif event_type == hci.HCI_LE_Advertising_Report_Event.EventType.SCAN_RSP:
        kind, secondary, sid = 0x1B, 0, 0xFF               # legacy scan response to ADV_IND
    else:
        kind, secondary, sid = 0x13, 0, 0xFF               # legacy ADV_IND
    return hci.HCI_LE_Extended_Advertising_Report_Event([hci.HCI_LE_Extended_Advertising_Report_Event.Report(
        event_type=kind, address_type=address.address_type, address=address, primary_phy=PHY_1M,
        secondary_phy=secondary, advertising_sid=sid, tx_power=0x7F, rssi=-50, periodic_advertising_interval=0,
        direct_address_type=0, direct_address=hci.Address.ANY, data=data)])


def accept_list_entry(address_type, address):
    return (address_type in (hci.AddressType.PUBLIC_DEVICE, hci.AddressType.PUBLIC_IDENTITY), address.address_bytes)


def in_window(elapsed, interval, window):
    """Whether a scanner that started `elapsed` seconds ago is listening (scan interval and window in
    0.625 ms units; a window as long as the interval listens all the time)."""
    if window >= interval or interval <= 0:
        return True
    return (elapsed % (interval * 0.000625)) < window * 0.000625


class RawPacket:
    """An H4 packet given as bytes (indicator included), for events Bumble has no class for."""

    def __init__(self, data):
        self.data = bytes(data)

    def __bytes__(self):
        return self.data

    def __str__(self):
        return f"RawPacket({self.data.hex()})"


ZEPHYR_MANUFACTURER = 0x05F1
ZEPHYR_OGF = 0x3F


class ZephyrStationController(StationController):
    """A station controller that answers like a Zephyr one (see the module docstring): BD_ADDR zero,
    manufacturer 0x05F1, vendor Read Supported Commands (bits: Read Version Information, Read Supported
    Commands, Read Static Addresses) and Read Static Addresses (`static_address`, with an identity root
    derived from it), LE ACL buffers of 251 octets."""

    manufacturer_company_identifier = ZEPHYR_MANUFACTURER

    def __init__(self, name, *, static_address, static_addresses=True, acl_buffers=(251, 10), **kwargs):
        super().__init__(name, acl_buffers=acl_buffers, **kwargs)
        self.static_address = hci.Address(static_address, hci.Address.RANDOM_DEVICE_ADDRESS)
        self.identity_root = hashlib.sha256(b"zephyr ir " + bytes(self.static_address)).digest()[:16]
        self.static_addresses = static_addresses
        self.vendor_commands = []  # OCFs the host asked, in order

    def on_packet(self, packet):
        # Vendor commands are answered from their bytes: Bumble knows other vendors' commands under
        # some of these opcodes and would parse them as those.
        if len(packet) >= 4 and packet[0] == 0x01 and packet[2] >> 2 == ZEPHYR_OGF:
            return self.on_vendor_command(int.from_bytes(packet[1:3], "little"))
        return super().on_packet(packet)

    def on_vendor_command(self, op_code):
        ocf = op_code & 0x3FF
        self.vendor_commands.append(ocf)
        if ocf == 0x0002:
            bits = bytearray(64)
            bits[0] = 0b011          # Read Version Information, Read Supported Commands
            if self.static_addresses:
                bits[1] = 0b001      # Read Static Addresses (bit 8)
            parameters = bytes([0]) + bytes(bits)
        elif ocf == 0x0009 and self.static_addresses:
            parameters = bytes([0, 1]) + bytes(self.static_address) + self.identity_root
        else:
            parameters = bytes([hci.HCI_ErrorCode.UNKNOWN_HCI_COMMAND_ERROR])
        complete = bytes([0x04, 0x0E, 3 + len(parameters), 1]) + op_code.to_bytes(2, "little") + parameters
        self.send_hci_packet(RawPacket(complete))
