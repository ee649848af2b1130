import Synchronization

/// Attribute layouts shared by the sessions of a run, so that later devices of one layout skip discovery.
/// The argument for why a cached handle never reaches the wrong attribute is in docs/ble.md ("The GATT
/// cache").
///
/// - A layout is filed under its server's Database Hash (Vol 3 Part G 7.3) and used on a link only after
///   that link's own server returned the same hash. The hash covers every service, include and
///   characteristic declaration (handles, UUIDs as declared, properties) and the handle and type of every
///   descriptor that matters, so an equal hash means equal handles.
/// - For servers without a Database Hash no handle is shared: handles are discovered on each link. What
///   is kept, per key (the device model, as the caller knows it), are discovery hints: whether the server
///   has a hash at all, which services it declares in 128-bit form, whether it answers Find By Type Value
///   and Read Multiple Variable Length. A wrong hint reorders the search; it cannot select an attribute.
/// - A layout that led an operation to an attribute-level error is distrusted for the rest of the run:
///   it is neither handed out nor extended again.
public final class GATTCache: Sendable {
    /// Discovery hints for servers of one key.
    public struct Hints: Sendable, Equatable {
        /// Whether servers of this key expose a Database Hash (nil: not known yet).
        public var hasDatabaseHash: Bool?
        /// Services found only by their 128-bit form.
        public var longForm: Set<BluetoothUUID> = []
        /// Find By Type Value is answered Request Not Supported.
        public var findByValueUnsupported = false
        /// Read Multiple Variable Length is answered (nil: not known yet).
        public var readMultipleVariable: Bool?
        public init() {}
    }

    /// How the cache was used.
    public struct Statistics: Sendable, Equatable {
        /// Links that found their server's layout under its hash.
        public var hits = 0
        /// Links whose server's hash was new (or distrusted).
        public var misses = 0
        /// Layouts distrusted after leading an operation astray.
        public var distrusted = 0
    }

    private struct State {
        var layouts: [[UInt8]: GATTLayout] = [:]
        var distrusted: Set<[UInt8]> = []
        var hints: [String: Hints] = [:]
        var statistics = Statistics()
    }

    private let state = Mutex(State())

    public init() {}

    /// The layout filed under `hash`, unless distrusted. Counts a hit or a miss.
    public func layout(forHash hash: [UInt8]) -> GATTLayout? {
        state.withLock { s in
            guard !s.distrusted.contains(hash), let layout = s.layouts[hash] else {
                s.statistics.misses += 1
                return nil
            }
            s.statistics.hits += 1
            return layout
        }
    }

    /// Adds what a link learned of the layout with this hash (nothing, once it is distrusted).
    public func store(_ layout: GATTLayout, forHash hash: [UInt8]) {
        guard hash.count == 16, !layout.isEmpty else { return }
        state.withLock { s in
            guard !s.distrusted.contains(hash) else { return }
            s.layouts[hash, default: GATTLayout()].merge(layout)
        }
    }

    /// The layout under `hash` led an operation astray: never use it again in this run.
    public func distrust(hash: [UInt8]) {
        state.withLock { s in
            s.layouts[hash] = nil
            if s.distrusted.insert(hash).inserted { s.statistics.distrusted += 1 }
        }
    }

    /// The hints for servers of `key`.
    public func hints(for key: String) -> Hints {
        state.withLock { $0.hints[key] } ?? Hints()
    }

    /// Updates the hints for servers of `key`.
    public func updateHints(for key: String, _ body: @Sendable (inout Hints) -> Void) {
        state.withLock { body(&$0.hints[key, default: Hints()]) }
    }

    public var statistics: Statistics { state.withLock { $0.statistics } }
}
