/// An MCUboot image version: major.minor.revision and a build number (the header's `ih_ver`).
///
/// Ordered as MCUboot compares versions (major, minor, revision, then build number). Written as
/// `1.2.3` when the build number is 0 and `1.2.3.4` otherwise, as MCUmgr's image state reports it;
/// `1.2.3+4` is read as well (imgtool's spelling).
public struct ImageVersion: Sendable, Hashable, Comparable, CustomStringConvertible {
    public var major: UInt8
    public var minor: UInt8
    public var revision: UInt16
    public var build: UInt32

    public init(major: UInt8, minor: UInt8, revision: UInt16, build: UInt32 = 0) {
        self.major = major
        self.minor = minor
        self.revision = revision
        self.build = build
    }

    /// Reads `1.2.3`, `1.2.3.4`, `1.2.3+4` (and `1.2`, `1`: missing parts are 0). Nil when a part is not a
    /// number or does not fit its field.
    public init?(_ text: String) {
        var main = Substring(text)
        var buildText: Substring?
        if let plus = main.firstIndex(of: "+") {
            buildText = main[main.index(after: plus)...]
            main = main[..<plus]
        }
        let parts = main.split(separator: ".", omittingEmptySubsequences: false)
        guard (1...4).contains(parts.count), buildText == nil || parts.count <= 3 else { return nil }
        guard let major = UInt8(parts[0]) else { return nil }
        let minor = parts.count > 1 ? UInt8(parts[1]) : 0
        let revision = parts.count > 2 ? UInt16(parts[2]) : 0
        let build = parts.count > 3 ? UInt32(parts[3]) : (buildText.map { UInt32($0) } ?? 0)
        guard let minor, let revision, let build else { return nil }
        self.init(major: major, minor: minor, revision: revision, build: build)
    }

    public var description: String {
        let base = "\(major).\(minor).\(revision)"
        return build == 0 ? base : base + ".\(build)"
    }

    public static func < (a: ImageVersion, b: ImageVersion) -> Bool {
        (a.major, a.minor, a.revision, a.build) < (b.major, b.minor, b.revision, b.build)
    }

    /// True when `self` is newer than `other` in major.minor.revision (what a device checks for an
    /// upgrade-only upload by default, ignoring build numbers).
    public func isNewerIgnoringBuild(than other: ImageVersion) -> Bool {
        (major, minor, revision) > (other.major, other.minor, other.revision)
    }
}
