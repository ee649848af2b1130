import Foundation

/// A fresh directory under the system temporary directory, removed when the value is released.
final class TraceDirectory {
    let path: String

    init() throws {
        path = FileManager.default.temporaryDirectory.path + "/trace-tests-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }

    func file(_ name: String) -> String { path + "/" + name }

    func bytes(_ name: String) -> [UInt8] {
        FileManager.default.contents(atPath: file(name)).map { [UInt8]($0) } ?? []
    }

    deinit {
        try? FileManager.default.removeItem(atPath: path)
    }
}
