import AsyncSupport
import BLE
import Foundation
import PostgresClient
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A throwaway PostgreSQL cluster for tests: `initdb` in a temporary directory, a server on a free
/// port of 127.0.0.1, run as an unprivileged user, and removed afterwards even if the test process dies.
///
/// - Binaries: `PROVISION_PG_BIN`, else the newest `/usr/lib/postgresql/*/bin` (apt `postgresql`; `make
///   test` installs it).
/// - PostgreSQL refuses to run as root. When the tests run as root (here and in CI), every server
///   command runs as the `postgres` system user (created by the Debian package) through `runuser`, and
///   the cluster's directory belongs to that user. As another user, the commands run as that user.
/// - Authentication: password (SCRAM) over TCP for the superuser `provision` with a random password, so
///   tests exercise passwords in connection strings; trust over the cluster's own Unix socket, used only
///   by the harness to create databases.
/// - Cleanup: a watchdog process holds a pipe from the test process; when the pipe closes — `stop()`, or
///   the test process ending in any way — it stops the server (`pg_ctl stop -m immediate`) and removes the
///   directory.
public final class PostgresCluster: Sendable {
    public let port: Int
    /// The cluster's directory (data directory, socket, log).
    public let directory: String
    public let dataDirectory: String
    /// The superuser's password (TCP connections need it).
    public let password: String
    let bin: String
    let runAs: String?
    private let watchdog: Process
    private let watchdogInput: Pipe
    private let watchdogExited: ExitWaiter
    private let stopped = Mutex(false)

    public static let superuser = "provision"

    // MARK: Availability

    /// Where the server binaries are, or why there are none.
    public static let binaries: Result<String, ClusterError> = {
        let env = ProcessInfo.processInfo.environment
        if let bin = env["PROVISION_PG_BIN"], !bin.isEmpty {
            return FileManager.default.isExecutableFile(atPath: bin + "/initdb")
                ? .success(bin) : .failure(ClusterError("PROVISION_PG_BIN=\(bin) has no initdb"))
        }
        let root = "/usr/lib/postgresql"
        let versions = ((try? FileManager.default.contentsOfDirectory(atPath: root)) ?? [])
            .compactMap { Int($0) }.sorted(by: >)
        for v in versions where FileManager.default.isExecutableFile(atPath: "\(root)/\(v)/bin/initdb") {
            return .success("\(root)/\(v)/bin")
        }
        return .failure(ClusterError("no PostgreSQL server binaries (apt-get install postgresql, or run `make test`, or set PROVISION_PG_BIN)"))
    }()

    /// The user the server runs as when the tests run as root.
    static let serverUser: Result<String?, ClusterError> = {
        guard geteuid() == 0 else { return .success(nil) }
        let name = ProcessInfo.processInfo.environment["PROVISION_PG_USER"] ?? "postgres"
        guard getpwnam(name) != nil else {
            return .failure(ClusterError("running as root and there is no '\(name)' user to run PostgreSQL as (the postgresql package creates 'postgres'; or set PROVISION_PG_USER)"))
        }
        guard FileManager.default.isExecutableFile(atPath: "/usr/sbin/runuser") || FileManager.default.isExecutableFile(atPath: "/sbin/runuser") else {
            return .failure(ClusterError("running as root without runuser(1) (util-linux) to start PostgreSQL as '\(name)'"))
        }
        return .success(name)
    }()

    /// True when a cluster can be started here.
    public static var available: Bool {
        if case .success = binaries, case .success = serverUser { return true }
        return false
    }

    /// True when the tests must run (CI, or `make test`, which sets PROVISION_REQUIRE_POSTGRES=1): a
    /// missing PostgreSQL is then a failure, not a skip.
    public static var required: Bool {
        let env = ProcessInfo.processInfo.environment
        return env["PROVISION_REQUIRE_POSTGRES"] == "1" || (env["CI"].map { !$0.isEmpty && $0 != "false" } ?? false)
    }

    /// Whether tests that need a cluster run: when one can start, or when they must (and then fail clearly).
    public static var shouldRun: Bool { available || required }

    /// Why a cluster cannot start (nil when it can).
    public static var unavailableReason: String? {
        if case .failure(let e) = binaries { return e.description }
        if case .failure(let e) = serverUser { return e.description }
        return nil
    }

    public struct ClusterError: Error, CustomStringConvertible, Sendable {
        public var description: String
        init(_ description: String) { self.description = description }
    }

    // MARK: Starting and stopping

    /// One cluster shared by every test of the process (started on first use; its watchdog stops it when
    /// the process ends), with TLS when `tlsAvailable`. Tests create their own database on it (`createDatabase`).
    public static func shared() async throws -> PostgresCluster {
        let task = sharedCluster.withLock { t -> Task<PostgresCluster, any Error> in
            if let t { return t }
            let new = Task { try await start(tls: tlsAvailable) }
            t = new
            return new
        }
        return try await task.value
    }

    private static let sharedCluster = Mutex<Task<PostgresCluster, any Error>?>(nil)

    /// Whether test clusters can offer TLS (the openssl command makes their certificate). The shared
    /// cluster does when it can, so every test's connection goes through TLS (`sslmode=prefer`).
    public static let tlsAvailable = FileManager.default.isExecutableFile(atPath: "/usr/bin/openssl")

    /// Starts a new cluster. `fsync: false` (the default for tests) trades crash safety for speed;
    /// benchmarks use `fsync: true`. With `tls`, the server also accepts TLS with a self-signed
    /// certificate made by the openssl command (libpq's default `sslmode=prefer` then uses it).
    public static func start(fsync: Bool = false, tls: Bool = false, timeout: Duration = .seconds(120)) async throws -> PostgresCluster {
        if let reason = unavailableReason { throw ClusterError("PostgreSQL is not available: \(reason)") }
        guard case .success(let bin) = binaries, case .success(let runAs) = serverUser else { throw ClusterError("unreachable") }
        // The server user must reach the directory: /tmp when it is another user (TMPDIR may be private).
        let parent = runAs == nil ? FileManager.default.temporaryDirectory.path : "/tmp"
        let directory = parent + "/provision-pg-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: false,
                                                attributes: [.posixPermissions: 0o700])
        if let runAs, let pw = getpwnam(runAs) {
            guard chown(directory, pw.pointee.pw_uid, pw.pointee.pw_gid) == 0 else {
                throw ClusterError("cannot give \(directory) to \(runAs): errno \(errno)")
            }
        }
        let password = (0..<4).map { _ in String(UInt32.random(in: .min ... .max), radix: 16) }.joined()
        let dataDirectory = directory + "/data"
        let passwordFile = directory + "/pwfile"
        try writeFile(passwordFile, password + "\n", owner: runAs)

        // The watchdog first, so that whatever happens next, the directory goes away with the test process.
        let (watchdog, input, exited) = try startWatchdog(bin: bin, runAs: runAs, dataDirectory: dataDirectory, directory: directory)
        do {
            let initdb = try await run(bin + "/initdb", ["-D", dataDirectory, "-U", superuser, "--pwfile=\(passwordFile)",
                                                         "--auth-local=trust", "--auth-host=scram-sha-256",
                                                         "--encoding=UTF8", "--locale=C", "--no-sync"],
                                       as: runAs, timeout: timeout)
            guard initdb.status == 0 else { throw ClusterError("initdb failed (\(initdb.status)): \(initdb.output)") }
            if tls {
                let made = try await run("/usr/bin/openssl", ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=127.0.0.1",
                                                               "-keyout", dataDirectory + "/server.key", "-out", dataDirectory + "/server.crt"],
                                         as: runAs, timeout: timeout)
                guard made.status == 0 else { throw ClusterError("openssl could not make a test certificate (\(made.status)): \(made.output)") }
                _ = chmod(dataDirectory + "/server.key", 0o600)
            }
            var lastFailure = ""
            for _ in 0..<5 {
                let port = try freePort()
                let settings = """

                    # provision test cluster
                    port = \(port)
                    listen_addresses = '127.0.0.1'
                    unix_socket_directories = '\(directory)'
                    fsync = \(fsync ? "on" : "off")
                    synchronous_commit = on
                    full_page_writes = \(fsync ? "on" : "off")
                    max_connections = 200
                    log_min_messages = warning
                    ssl = \(tls ? "on" : "off")
                    """
                try appendFile(dataDirectory + "/postgresql.conf", settings)
                let started = try await run(bin + "/pg_ctl", ["-D", dataDirectory, "-l", directory + "/server.log", "-w", "-t", "60", "start"],
                                            as: runAs, timeout: timeout)
                if started.status == 0 {
                    return PostgresCluster(port: port, directory: directory, dataDirectory: dataDirectory, password: password,
                                           bin: bin, runAs: runAs, watchdog: watchdog, input: input, exited: exited)
                }
                let log = (try? String(contentsOfFile: directory + "/server.log", encoding: .utf8)) ?? ""
                lastFailure = "pg_ctl start failed (\(started.status)): \(started.output)\n\(log.suffix(2000))"
                guard log.contains("could not bind") || log.contains("Address already in use") else { break }
            }
            throw ClusterError(lastFailure)
        } catch {
            input.fileHandleForWriting.closeFile()
            _ = await exited.wait(timeout: .seconds(30))
            throw error
        }
    }

    private init(port: Int, directory: String, dataDirectory: String, password: String, bin: String, runAs: String?,
                 watchdog: Process, input: Pipe, exited: ExitWaiter) {
        self.port = port
        self.directory = directory
        self.dataDirectory = dataDirectory
        self.password = password
        self.bin = bin
        self.runAs = runAs
        self.watchdog = watchdog
        self.watchdogInput = input
        self.watchdogExited = exited
    }

    /// Stops the server and removes its directory (through the watchdog), and waits (within a minute)
    /// until that is done. Idempotent.
    public func stop() async {
        guard beginStopping() else { return }
        _ = await watchdogExited.wait(timeout: .seconds(60))
    }

    /// Closes the watchdog's pipe once; true the first time.
    private func beginStopping() -> Bool {
        let first = stopped.withLock { s -> Bool in
            defer { s = true }
            return !s
        }
        if first { watchdogInput.fileHandleForWriting.closeFile() }
        return first
    }

    // The watchdog stops the server and removes the directory; nothing here waits for it.
    deinit { _ = beginStopping() }

    /// Runs `body` with a new cluster of its own and always stops it.
    public static func with<T>(fsync: Bool = false, _ body: (PostgresCluster) async throws -> T) async throws -> T {
        try await scoped(try await start(fsync: fsync), stop: { await $0.stop() }, body)
    }

    /// Restarts the server: `fast` ends sessions with "terminating connection due to administrator
    /// command"; `immediate` is a crash (recovery on start).
    public func restart(mode: String = "fast") async throws {
        let r = try await Self.run(bin + "/pg_ctl", ["-D", dataDirectory, "-l", directory + "/server.log", "-m", mode, "-w", "-t", "60", "restart"],
                                   as: runAs, timeout: .seconds(120))
        guard r.status == 0 else { throw ClusterError("pg_ctl restart failed (\(r.status)): \(r.output)") }
    }

    /// Stops the server (`fast`: sessions are ended) and leaves the cluster to be started again.
    public func stopServer(mode: String = "fast") async throws {
        let r = try await Self.run(bin + "/pg_ctl", ["-D", dataDirectory, "-m", mode, "-w", "-t", "60", "stop"], as: runAs, timeout: .seconds(120))
        guard r.status == 0 else { throw ClusterError("pg_ctl stop failed (\(r.status)): \(r.output)") }
    }

    /// Starts the server again after `stopServer`, on the same port.
    public func startServer() async throws {
        let r = try await Self.run(bin + "/pg_ctl", ["-D", dataDirectory, "-l", directory + "/server.log", "-w", "-t", "60", "start"],
                                   as: runAs, timeout: .seconds(120))
        guard r.status == 0 else { throw ClusterError("pg_ctl start failed (\(r.status)): \(r.output)") }
    }

    // MARK: Databases and connections

    /// A connection string for `database` over TCP with the superuser's password.
    public func connectionString(database: String = "postgres", user: String = superuser, password: String? = nil) -> String {
        "host=127.0.0.1 port=\(port) dbname=\(database) user=\(user) password=\(password ?? self.password) connect_timeout=10"
    }

    /// Creates an empty database with a fresh name and returns its connection string (the superuser's).
    /// `owner`: a role (that exists) to own it, as `CREATE DATABASE … OWNER` — which cannot run through a
    /// pipelined connection.
    public func createDatabase(owner: String? = nil) async throws -> String {
        let name = "t_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "").prefix(16)
        let r = try await Self.run(bin + "/createdb", ["-h", directory, "-p", String(port), "-U", Self.superuser]
                                       + (owner.map { ["-O", $0] } ?? []) + [name],
                                   as: runAs, timeout: .seconds(60))
        guard r.status == 0 else { throw ClusterError("createdb failed (\(r.status)): \(r.output)") }
        return connectionString(database: name)
    }

    /// Connects as the superuser to `connectionString` (or a fresh database).
    public func connect(_ connectionString: String, timeout: Duration = .seconds(30)) async throws -> PostgresConnection {
        try await PostgresConnection.connect(ConnectionString(connectionString), timeout: timeout, defaultTimeout: .seconds(60))
    }

    // MARK: Processes

    /// Runs a command (as `user` through runuser when given) and waits for it within `timeout`.
    static func run(_ executable: String, _ arguments: [String], as user: String?, timeout: Duration) async throws -> (status: Int32, output: String) {
        let process = Process()
        // Foundation's Process notices a child's exit when a socket it leaves open in the child closes;
        // a server that pg_ctl starts in the background would inherit that socket and hold it for its
        // whole life. bash (dash cannot name descriptors above 9) closes every descriptor above 2 first.
        let closeAndRun = #"for fd in /proc/$$/fd/*; do n=${fd##*/}; if [ "$n" -gt 2 ]; then eval "exec $n>&-"; fi; done; exec "$@""#
        let command = ["/bin/bash", "-c", closeAndRun, "bash", executable] + arguments
        if let user {
            process.executableURL = URL(fileURLWithPath: FileManager.default.isExecutableFile(atPath: "/usr/sbin/runuser") ? "/usr/sbin/runuser" : "/sbin/runuser")
            process.arguments = ["-u", user, "--"] + command
        } else {
            process.executableURL = URL(fileURLWithPath: "/bin/bash")
            process.arguments = Array(command.dropFirst())
        }
        var env = ProcessInfo.processInfo.environment
        env["LC_ALL"] = "C"
        env.removeValue(forKey: "PGPASSWORD")
        process.environment = env
        // /tmp is reachable by the server user; the test's working directory may not be.
        process.currentDirectoryURL = URL(fileURLWithPath: "/")
        let output = FileManager.default.temporaryDirectory.appendingPathComponent("provision-pg-out-\(UUID().uuidString)")
        _ = FileManager.default.createFile(atPath: output.path, contents: nil)
        defer { try? FileManager.default.removeItem(at: output) }
        let handle = try FileHandle(forWritingTo: output)
        process.standardOutput = handle
        process.standardError = handle
        process.standardInput = FileHandle.nullDevice
        let waiter = ExitWaiter()
        process.terminationHandler = { p in waiter.exited(p.terminationStatus) }
        try process.run()
        try? handle.close()
        guard let status = await waiter.wait(timeout: timeout) else {
            process.terminate()
            throw ClusterError("\(executable) \(arguments.joined(separator: " ")) did not finish within \(timeout)")
        }
        let text = (try? String(contentsOf: output, encoding: .utf8)) ?? ""
        return (status, text)
    }

    /// The process that stops the server and removes the directory once its standard input closes.
    private static func startWatchdog(bin: String, runAs: String?, dataDirectory: String, directory: String) throws -> (Process, Pipe, ExitWaiter) {
        let script = #"cat >/dev/null; [ -f "$1/postmaster.pid" ] && "$0" -D "$1" -m immediate -w -t 30 stop >/dev/null 2>&1; rm -rf "$2""#
        let process = Process()
        let shellArguments = ["-c", script, bin + "/pg_ctl", dataDirectory, directory]
        if let runAs {
            process.executableURL = URL(fileURLWithPath: FileManager.default.isExecutableFile(atPath: "/usr/sbin/runuser") ? "/usr/sbin/runuser" : "/sbin/runuser")
            process.arguments = ["-u", runAs, "--", "/bin/sh"] + shellArguments
        } else {
            process.executableURL = URL(fileURLWithPath: "/bin/sh")
            process.arguments = shellArguments
        }
        process.currentDirectoryURL = URL(fileURLWithPath: "/")
        let input = Pipe()
        process.standardInput = input
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        let exited = ExitWaiter()
        process.terminationHandler = { p in exited.exited(p.terminationStatus) }
        try process.run()
        return (process, input, exited)
    }

    private static func writeFile(_ path: String, _ text: String, owner: String?) throws {
        guard FileManager.default.createFile(atPath: path, contents: Data(text.utf8), attributes: [.posixPermissions: 0o600]) else {
            throw ClusterError("cannot write \(path)")
        }
        if let owner, let pw = getpwnam(owner) { _ = chown(path, pw.pointee.pw_uid, pw.pointee.pw_gid) }
    }

    private static func appendFile(_ path: String, _ text: String) throws {
        guard let handle = FileHandle(forWritingAtPath: path) else { throw ClusterError("cannot open \(path)") }
        defer { try? handle.close() }
        try handle.seekToEnd()
        try handle.write(contentsOf: Data(text.utf8))
    }

    /// A port of 127.0.0.1 that was free a moment ago (the caller retries if it is taken meanwhile).
    public static func freePort() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw ClusterError("socket: errno \(errno)") }
        defer { _ = Glibc.close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0 else { throw ClusterError("bind: errno \(errno)") }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let named = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        guard named == 0 else { throw ClusterError("getsockname: errno \(errno)") }
        return Int(UInt16(bigEndian: address.sin_port))
    }
}
