// swift-tools-version:6.0
import PackageDescription

// Targets are layers; imports point down only (see docs/architecture.md).
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

        // Helpers with one home each (no dependencies): JSON string escaping, "did you mean" suggestions,
        // SplitMix64, stable string hashes, the catalogue CRCs.
        .target(name: "Support"),
        // YAML document model with source marks (over libyaml).
        .target(name: "YAML", dependencies: ["CYAML"]),
        // Bluetooth: core types, ATT, GATT, Central/Link/Session API.
        .target(name: "BLE"),
        // Security: the SMP crypto toolbox over libcrypto, SMP PDUs, pairing state machines, the bond store.
        .target(name: "BLESecurity", dependencies: ["BLE", "CLibCrypto"]),
        // Adapters: the in-process simulated fleet and the user-space HCI host.
        .target(name: "BLESimulator", dependencies: ["BLE", "BLESecurity", "YAML", "Support"]),
        .target(name: "HCI", dependencies: ["BLE", "BLESecurity", "CBlueZ", "Support"]),
        // Protocol traces: btsnoop files of HCI traffic (Wireshark) and ATT-level traces of the simulator.
        .target(name: "Trace", dependencies: ["BLE"]),
        // Workflow and inventory models, validation, templates, codecs.
        .target(name: "Workflow", dependencies: ["YAML", "BLE", "Support"]),
        // PostgreSQL client over libpq: non-blocking I/O on one thread per connection, deadlines, cancellation,
        // parameterised statements, pipelines, transactions, typed rows.
        .target(name: "PostgresClient", dependencies: ["CLibPQ"]),
        // The line database: schema and migrations, the claim/lease protocol, group-committed intents and outcomes.
        .target(name: "LineDatabase", dependencies: ["PostgresClient"]),
        // Scheduler, device agents, supervisor, journal, report.
        .target(name: "Engine", dependencies: ["BLE", "Workflow", "Support"]),
        // The engine's run store on the line database: claims and leases for the scheduler, intents and
        // outcomes on the line, the local spool while the line is away, the line's merged report.
        .target(name: "LineStore", dependencies: ["Engine", "Workflow", "LineDatabase", "PostgresClient"]),
        // Benchmarks (`provision bench`): the engine's layers measured apart, kept out of the library targets.
        .target(name: "Benchmarks", dependencies: ["BLE", "BLESecurity", "BLESimulator", "Engine", "LineDatabase", "LineStore", "PostgresClient"]),
        // The command line: argument parsing, commands, progress display, exit codes.
        .target(name: "ProvisionCLI", dependencies: ["Engine", "Workflow", "YAML", "BLE", "BLESecurity", "BLESimulator", "HCI", "Trace", "Support", "LineStore", "LineDatabase", "PostgresClient", "Benchmarks"]),
        .executableTarget(name: "provision", dependencies: ["ProvisionCLI"]),

        // Test support: a small production line in a temporary directory (workflow, inventory, blobs, model).
        // Also a throwaway PostgreSQL cluster (initdb in a temporary directory, as an unprivileged user).
        .target(name: "TestSupport", dependencies: ["Engine", "Workflow", "BLESimulator", "BLE", "PostgresClient"], path: "Tests/TestSupport"),

        .testTarget(name: "SupportTests", dependencies: ["Support"]),
        .testTarget(name: "YAMLTests", dependencies: ["YAML"]),
        .testTarget(name: "WorkflowTests", dependencies: ["Workflow", "YAML", "Support"]),
        .testTarget(name: "BLETests", dependencies: ["BLE", "Support", "Benchmarks"]),
        .testTarget(name: "BLESecurityTests", dependencies: ["BLESecurity", "BLE", "Benchmarks"]),
        .testTarget(name: "BLESimulatorTests", dependencies: ["BLESimulator", "BLE", "BLESecurity", "Benchmarks"]),
        .testTarget(name: "PostgresClientTests", dependencies: ["PostgresClient", "TestSupport"]),
        .testTarget(name: "LineDatabaseTests", dependencies: ["LineDatabase", "PostgresClient", "TestSupport", "BLESimulator", "Benchmarks"]),
        .testTarget(name: "HCITests", dependencies: ["HCI", "BLE", "BLESecurity", "TestSupport"]),
        .testTarget(name: "TraceTests", dependencies: ["Trace", "BLE", "Support"]),
        .testTarget(name: "EngineTests", dependencies: ["Engine", "BLESimulator", "Workflow", "BLE", "YAML", "Support", "TestSupport"]),
        .testTarget(name: "LineStoreTests", dependencies: ["LineStore", "LineDatabase", "PostgresClient", "Engine", "Workflow", "BLESimulator", "TestSupport", "Benchmarks"]),
        .testTarget(name: "ProvisionTests", dependencies: ["ProvisionCLI", "Engine", "Workflow", "BLE", "BLESimulator", "Support", "TestSupport", "Trace", "LineDatabase", "PostgresClient"]),
    ],
    swiftLanguageModes: [.v6]
)
