import BLE
import HCI
import Testing

@Suite struct AdapterConfigurationTests {
    @Test func optionsFollowTheTransportAfterCommas() throws {
        let c = try AdapterConfiguration(parsing: "hci:tcp:127.0.0.1:9000,slots=16,scan-interval=100ms,scan-window=50ms,scan=passive,"
                                         + "conn-interval=7.5ms-15ms,supervision-timeout=2s,data-length=off,phy=1m,accept-list=off,"
                                         + "scan-while-connecting=on,rotation=1.5s")
        #expect(c.spec == .tcp(host: "127.0.0.1", port: 9000))
        var o = HCIAdapter.Options()
        c.apply(to: &o)
        #expect(o.connectionSlots == 16)
        #expect(o.scanInterval == .milliseconds(100) && o.scanWindow == .milliseconds(50) && !o.activeScan)
        #expect(o.connectionIntervalMin == .microseconds(7500) && o.connectionIntervalMax == .milliseconds(15))
        #expect(o.supervisionTimeout == .seconds(2))
        #expect(!o.dataLength && !o.twoMegabitPHY)
        #expect(o.acceptList == .off && o.scanWhileConnecting == true && o.rotation == .milliseconds(1500))
    }

    @Test func aSpecWithoutOptionsKeepsTheDefaults() throws {
        let c = try AdapterConfiguration(parsing: "hci:serial:/dev/ttyACM0@115200")
        #expect(c.spec == .serial(path: "/dev/ttyACM0", baud: 115200))
        var o = HCIAdapter.Options(connectionSlots: 5)
        c.apply(to: &o)
        #expect(o.connectionSlots == 5 && o.dataLength && o.twoMegabitPHY && o.acceptList == .auto && o.scanWhileConnecting == nil)
        let auto = try AdapterConfiguration(parsing: "hci:user:0,scan-while-connecting=auto,conn-interval=30ms")
        c.apply(to: &o)
        auto.apply(to: &o)
        #expect(o.scanWhileConnecting == nil)
        #expect(o.connectionIntervalMin == .milliseconds(30) && o.connectionIntervalMax == .milliseconds(30))
    }

    @Test func badOptionsSayWhatIsWrong() {
        for (spec, words) in [("hci:tcp:h:1,slot=3", "unknown option 'slot'"), ("hci:tcp:h:1,slots", "name=value"),
                              ("hci:tcp:h:1,slots=0", "1 to 64"), ("hci:tcp:h:1,scan-interval=1ms", "2.5ms"),
                              ("hci:tcp:h:1,scan-window=90ms", "longer than scan-interval"), ("hci:tcp:h:1,phy=3m", "2m or 1m"),
                              ("hci:tcp:h:1,conn-interval=30ms-15ms", "above the maximum"), ("hci:tcp:h:1,data-length=maybe", "on or off"),
                              ("hci:tcp:h:1,accept-list=always", "auto, on or off"), ("hci:tcp:h:1,rotation=2", "duration"),
                              ("hci:tcp:h,slots=2", "PORT"), ("hci:tcp:h:1,slots=1,slots=2", "option 'slots' is given twice"),
                              ("hci:tcp:h:1,phy=2m,PHY=1m", "option 'phy' is given twice")] {
            #expect {
                _ = try AdapterConfiguration(parsing: spec)
            } throws: { error in
                "\(error)".contains(words)
            }
        }
    }

    @Test func theStationAddressIsAStaticRandomAddress() throws {
        var o = HCIAdapter.Options()
        try AdapterConfiguration(parsing: "hci:serial:/dev/ttyACM0?baud=1000000&flow=rtscts,address=c4:5a:00:00:00:01").apply(to: &o)
        #expect(o.staticRandomAddress == BluetoothAddress("C4:5A:00:00:00:01", kind: .random))
        for (spec, words) in [("hci:user:0,address=00:11:22:33:44:55", "not a static random address"),
                              ("hci:user:0,address=FF:FF:FF:FF:FF:FF", "not a static random address"),
                              ("hci:user:0,address=C4:5A", "not an address")] {
            #expect {
                _ = try AdapterConfiguration(parsing: spec)
            } throws: { error in
                "\(error)".contains(words)
            }
        }
    }

    @Test func optionsBecomeWireUnitsClampedToTheSpec() throws {
        var o = HCIAdapter.Options()
        try AdapterConfiguration(parsing: "hci:user:0,scan-interval=60ms,scan-window=30ms,conn-interval=7.5ms-4s,supervision-timeout=100ms")
            .apply(to: &o)
        let adapterHost = HCIHost(o.hostConfiguration)
        let p = adapterHost.connections.configuration.parameters
        #expect(p.scanInterval == 0x60 && p.intervalMin == 6 && p.intervalMax == 3200)
        // 100 ms is too short for a 4 s interval: raised to more than twice the interval.
        #expect(Int(p.supervisionTimeout) * 10 > 2 * 4000)
    }
}
