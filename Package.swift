// swift-tools-version:6.0
import PackageDescription

// Targets are layers; imports point down only (see docs/architecture.md).
/// Release builds serialize these modules' generic bodies so their clients specialize them (a
/// `WaiterQueue<…>` used unspecialized across modules looked its generic metadata up on every call).
let crossModule: [SwiftSetting] = [.unsafeFlags(["-cross-module-optimization"], .when(configuration: .release))]

let package = Package(
    name: "provision",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "provision", targets: ["provision"]),
    ],
    targets: [
        // C system libraries, each behind one small Swift namespace.
        .systemLibrary(name: "CYAML", pkgConfig: "yaml-0.1", providers: [.apt(["libyaml-dev"])]),
        .systemLibrary(name: "CBlueZ", pkgConfig: "bluez", providers: [.apt(["libbluetooth-dev"])]),
        .systemLibrary(name: "CLibCrypto", pkgConfig: "libcrypto", providers: [.apt(["libssl-dev"])]),
        .systemLibrary(name: "CLibPQ", pkgConfig: "libpq", providers: [.apt(["libpq-dev"])]),
        .systemLibrary(name: "CPCRE2", pkgConfig: "libpcre2-8", providers: [.apt(["libpcre2-dev"])]),
        .systemLibrary(name: "CLibCBOR", pkgConfig: "libcbor", providers: [.apt(["libcbor-dev"])]),

        // Helpers with one home each (no dependencies): JSON string escaping, "did you mean" suggestions,
        // SplitMix64, stable string hashes, hex, civil-calendar day numbers, the catalogue CRCs.
        .target(name: "Support", swiftSettings: crossModule),
        // Async primitives, the one home of each: a FIFO waiter queue with cancellation and time limits,
        // the shared timeout driver, time limits on a body, a semaphore, a one-shot, a packet channel.
        .target(name: "AsyncSupport", swiftSettings: crossModule),
        // POSIX output, the one home of each: write-all (EINTR, partial writes, a stalled reader), atomic
        // replacement of a file, fsync of a directory, and the output-path rule every writer follows.
        .target(name: "SystemIO", swiftSettings: crossModule),
        // SHA-256 over libcrypto (EVP), for every layer that fingerprints bytes.
        .target(name: "Digests", dependencies: ["CLibCrypto", "Support"], swiftSettings: crossModule),
        // YAML document model with source marks (over libyaml), the one reader of typed values in it, and
        // the `${name}` templates its scalars hold.
        .target(name: "YAML", dependencies: ["CYAML", "Support"], swiftSettings: crossModule),
        // CBOR (RFC 8949) values over libcbor: bounded decoding of hostile bytes, preferred-form encoding.
        .target(name: "CBOR", dependencies: ["CLibCBOR", "Support"], swiftSettings: crossModule),
        // Bluetooth: core types, ATT, GATT, Central/Link/Session API.
        .target(name: "BLE", dependencies: ["AsyncSupport", "Digests", "Support"], swiftSettings: crossModule),
        // Security: the SMP crypto toolbox over libcrypto, SMP PDUs, pairing state machines, the bond store.
        .target(name: "BLESecurity", dependencies: ["AsyncSupport", "BLE", "CLibCrypto", "SystemIO"], swiftSettings: crossModule),
        // Adapters: the in-process simulated fleet and the user-space HCI host.
        .target(name: "BLESimulator", dependencies: ["AsyncSupport", "BLE", "BLESecurity", "Digests", "YAML", "Support", "SystemIO", "CBOR", "MCUboot", "McuMgr", "ESPProv"], swiftSettings: crossModule),
        .target(name: "HCI", dependencies: ["AsyncSupport", "BLE", "BLESecurity", "CBlueZ", "Digests", "Support"]),
        // MCUboot image files: header, TLV areas, the SHA-256 TLV verified (Digests).
        .target(name: "MCUboot", dependencies: ["BLE", "Digests"], swiftSettings: crossModule),
        // MCUmgr's SMP over GATT: frames, messages, errors, the client, the upload engine, the DFU decisions.
        .target(name: "McuMgr", dependencies: ["AsyncSupport", "BLE", "CBOR", "MCUboot"], swiftSettings: crossModule),
        // ESP-IDF unified provisioning over GATT: protocomm's protobuf messages, security schemes 0/1/2
        // (X25519 + AES-CTR, SRP6a + AES-GCM through libcrypto), the endpoint client and Wi-Fi provisioning.
        .target(name: "ESPProv", dependencies: ["BLE", "BLESecurity", "CLibCrypto"], swiftSettings: crossModule),
        // Protocol traces: btsnoop files of HCI traffic (Wireshark) and ATT-level traces of the simulator.
        .target(name: "Trace", dependencies: ["BLE", "SystemIO"]),
        // Workflow and inventory models, validation, templates, codecs, matchers (regexes bounded in time, over PCRE2).
        .target(name: "Workflow", dependencies: ["YAML", "BLE", "Digests", "Support", "CPCRE2", "MCUboot"], swiftSettings: crossModule),
        // PostgreSQL client over libpq: non-blocking I/O on one thread per connection, deadlines, cancellation,
        // parameterised statements, pipelines, transactions, typed rows.
        .target(name: "PostgresClient", dependencies: ["AsyncSupport", "CLibPQ", "Support"]),
        // The line database: schema and migrations, the claim/lease protocol, group-committed intents and outcomes.
        .target(name: "LineDatabase", dependencies: ["AsyncSupport", "PostgresClient"]),
        // Scheduler, device agents, supervisor, journal, report.
        .target(name: "Engine", dependencies: ["AsyncSupport", "BLE", "Workflow", "YAML", "Support", "SystemIO", "McuMgr", "MCUboot", "ESPProv"], swiftSettings: crossModule),
        // The engine's run store on the line database: claims and leases for the scheduler, intents and
        // outcomes on the line, the local spool while the line is away, the line's merged report.
        .target(name: "LineStore", dependencies: ["AsyncSupport", "Engine", "Workflow", "LineDatabase", "PostgresClient", "SystemIO"]),
        // Benchmarks (`provision bench`): the engine's layers measured apart, kept out of the library targets.
        .target(name: "Benchmarks", dependencies: ["BLE", "BLESecurity", "BLESimulator", "Engine", "LineDatabase", "LineStore", "PostgresClient", "Support"]),
        // The command line: argument parsing, commands, progress display, exit codes.
        .target(name: "ProvisionCLI", dependencies: ["AsyncSupport", "Digests", "SystemIO", "Engine", "Workflow", "YAML", "BLE", "BLESecurity", "BLESimulator", "HCI", "Trace", "Support", "LineStore", "LineDatabase", "PostgresClient", "Benchmarks"]),
        .executableTarget(name: "provision", dependencies: ["ProvisionCLI"]),

        // Test support: a Bumble fleet, a throwaway PostgreSQL cluster (initdb in a temporary directory, as an
        // unprivileged user), a TCP proxy. Nothing of the engine or the simulator.
        .target(name: "TestSupport", dependencies: ["AsyncSupport", "BLE", "Digests", "PostgresClient", "SystemIO"], path: "Tests/TestSupport"),
        // Test support for the engine and above: a small production line in a temporary directory (workflow,
        // inventory, blobs, model).
        .target(name: "EngineTestSupport", dependencies: ["AsyncSupport", "Digests", "Engine", "Workflow", "BLESimulator", "BLE", "SystemIO"], path: "Tests/EngineTestSupport"),

        .testTarget(name: "SupportTests", dependencies: ["Support"]),
        .testTarget(name: "AsyncSupportTests", dependencies: ["AsyncSupport"]),
        .testTarget(name: "SystemIOTests", dependencies: ["SystemIO", "TestSupport"]),
        .testTarget(name: "DigestsTests", dependencies: ["Digests"]),
        .testTarget(name: "CBORTests", dependencies: ["CBOR", "Support"]),
        .testTarget(name: "MCUbootTests", dependencies: ["MCUboot", "BLE", "Digests"]),
        .testTarget(name: "McuMgrTests", dependencies: ["Digests", "McuMgr", "MCUboot", "CBOR", "BLE", "Support", "BLESimulator", "YAML"]),
        .testTarget(name: "YAMLTests", dependencies: ["YAML"]),
        .testTarget(name: "WorkflowTests", dependencies: ["Workflow", "YAML", "Support", "MCUboot"]),
        .testTarget(name: "BLETests", dependencies: ["AsyncSupport", "Digests", "BLE", "Support"]),
        .testTarget(name: "BLESecurityTests", dependencies: ["BLESecurity", "BLE"]),
        .testTarget(name: "ESPProvTests", dependencies: ["ESPProv", "BLE", "BLESecurity", "Support"]),
        .testTarget(name: "BLESimulatorTests", dependencies: ["AsyncSupport", "Digests", "BLESimulator", "BLE", "BLESecurity"]),
        .testTarget(name: "PostgresClientTests", dependencies: ["PostgresClient", "TestSupport"]),
        .testTarget(name: "LineDatabaseTests", dependencies: ["LineDatabase", "PostgresClient", "Support", "TestSupport"]),
        .testTarget(name: "HCITests", dependencies: ["AsyncSupport", "Digests", "HCI", "BLE", "BLESecurity", "TestSupport"]),
        .testTarget(name: "TraceTests", dependencies: ["Trace", "BLE", "Support", "SystemIO"]),
        .testTarget(name: "EngineTests", dependencies: ["SystemIO", "Engine", "BLESimulator", "Workflow", "BLE", "YAML", "Support", "EngineTestSupport", "TestSupport"]),
        .testTarget(name: "LineStoreTests", dependencies: ["LineStore", "LineDatabase", "PostgresClient", "Engine", "Workflow", "BLESimulator", "TestSupport", "EngineTestSupport"]),
        .testTarget(name: "BenchmarksTests", dependencies: ["Benchmarks", "BLE", "BLESimulator", "Engine", "LineDatabase", "LineStore", "PostgresClient", "TestSupport"]),
        .testTarget(name: "ProvisionTests", dependencies: ["Digests", "SystemIO", "ProvisionCLI", "Engine", "Workflow", "BLE", "BLESimulator", "Support", "TestSupport", "EngineTestSupport", "Trace", "LineDatabase", "PostgresClient", "MCUboot"]),
    ],
    swiftLanguageModes: [.v6]
)
