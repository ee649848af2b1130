import Foundation
import Testing
import YAML
@testable import Workflow
#if canImport(Glibc)
import Glibc
#endif

/// Files sent to devices come from inside one directory (the inventory's, or `files: { root: DIR }`),
/// are regular files, and are not empty unless the workflow says so.
@Suite struct FileRootTests {
    /// A line in a temporary directory: `line/inventory.yaml`, `line/blobs/ok.bin`, a workflow streaming
    /// `${blob}`, and `secret.txt` beside the line (outside its root).
    final class Line {
        let dir: TemporaryDirectory
        var root: String { dir.path + "/line" }

        init() throws {
            dir = try TemporaryDirectory()
            try dir.write("line/blobs/ok.bin", [1, 2, 3])
            try dir.write("line/blobs/empty.bin", [])
            try dir.write("secret.txt", "do not send")
            try dir.write("line/workflow.yaml", Self.workflow(allowEmpty: false))
        }

        static func workflow(allowEmpty: Bool) -> String {
            """
            name: blob
            steps:
              - connect: {}
              - write_blob: { service: FFF0, characteristic: FFF4, file: "${blob}"\(allowEmpty ? ", allow_empty: true" : "") }
              - write: { service: FFF0, characteristic: FFF1, value: [ { hex: "03" }, { uint32le: { length_of: "${blob}" } } ] }
            """
        }

        /// Validates the workflow for one device whose `blob` is `blob`; `extra` goes at the top of the inventory.
        func validate(blob: String, extra: String = "", workflow: String? = nil) throws -> ValidationResult {
            if let workflow { try dir.write("line/workflow.yaml", workflow) }
            try dir.write("line/inventory.yaml", extra + "devices:\n  - { id: SN-1, address: \"C0:5E:00:00:00:01\", vars: { blob: \"\(blob)\" } }\n")
            return Validator.validate(workflowPath: root + "/workflow.yaml", inventoryPath: root + "/inventory.yaml")
        }
    }

    @Test func aPathInsideTheInventorysDirectoryIsSent() throws {
        let line = try Line()
        for blob in ["blobs/ok.bin", "./blobs/ok.bin", "blobs/../blobs/ok.bin"] {
            let r = try line.validate(blob: blob)
            #expect(r.isValid, "\(blob): \(r.errors.map(\.message))")
            #expect(r.inputFiles.contains(InputFile(role: "a file the workflow sends", path: FileRoot.realPath(line.root + "/blobs/ok.bin") ?? "")))
        }
    }

    @Test func pathsThatLeaveTheRootAreRefusedBeforeAnythingIsSent() throws {
        let line = try Line()
        try FileManager.default.createSymbolicLink(atPath: line.root + "/blobs/link.bin", withDestinationPath: line.dir.path + "/secret.txt")
        try FileManager.default.createSymbolicLink(atPath: line.root + "/blobs/environ", withDestinationPath: "/proc/self/environ")
        let cases: [(String, String)] = [
            ("../secret.txt", "leads outside"),
            ("../../../../../../etc/passwd", "leads outside"),
            ("/etc/passwd", "is an absolute path"),
            ("/proc/self/environ", "is an absolute path"),
            ("blobs/link.bin", "leads outside"),
            ("blobs/environ", "leads outside"),
        ]
        for (blob, why) in cases {
            let r = try line.validate(blob: blob)
            #expect(!r.isValid, "\(blob) was accepted")
            #expect(r.errors.contains { $0.message.contains("the value cannot be made for 1 device (SN-1)") && $0.message.contains(why) },
                    "\(blob): \(r.errors.map(\.message))")
        }
    }

    @Test func onlyRegularFilesAreSent() throws {
        let line = try Line()
        try FileManager.default.createDirectory(atPath: line.root + "/blobs/dir", withIntermediateDirectories: true)
        #expect(mkfifo(line.root + "/blobs/fifo", 0o600) == 0)
        for blob in ["blobs/dir", "blobs/fifo"] {
            let r = try line.validate(blob: blob)
            #expect(r.errors.contains { $0.message.contains("is not a regular file") }, "\(blob): \(r.errors.map(\.message))")
            // And at the write itself, should the file change after validation.
            #expect(throws: ValueError.self) {
                try ValueSpec.file(Template(literal: blob)).bytes(variables: { _ in nil }, baseDirectory: line.root)
            }
        }
    }

    @Test func anEmptyFileIsAnErrorUnlessTheWorkflowAllowsIt() throws {
        let line = try Line()
        let refused = try line.validate(blob: "blobs/empty.bin")
        #expect(refused.errors.count == 1)
        #expect(refused.errors.first?.message.contains("is empty; if an empty file is meant, say `allow_empty: true`") == true)
        #expect(throws: ValueError.self) {
            try ValueSpec.file(Template(literal: "blobs/empty.bin")).bytes(variables: { _ in nil }, baseDirectory: line.root)
        }
        let allowed = try line.validate(blob: "blobs/empty.bin", workflow: Line.workflow(allowEmpty: true))
        #expect(allowed.isValid, "\(allowed.errors.map(\.message))")
        #expect(try ValueSpec.file(Template(literal: "blobs/empty.bin"), allowEmpty: true).bytes(variables: { _ in nil }, baseDirectory: line.root) == [])
        // The value form takes the same option.
        let valueForm = """
            name: blob
            steps:
              - connect: {}
              - write: { service: FFF0, characteristic: FFF1, value: { file: "${blob}", allow_empty: true } }
            """
        #expect(try line.validate(blob: "blobs/empty.bin", workflow: valueForm).isValid)
    }

    @Test func theInventoryCanNameAnotherRoot() throws {
        let line = try Line()
        try line.dir.write("store/cert.bin", [9, 9])
        let r = try line.validate(blob: "cert.bin", extra: "files: { root: ../store }\n")
        #expect(r.isValid, "\(r.errors.map(\.message))")
        #expect(r.inventory?.baseDirectory == line.root + "/../store")
        #expect(try ValueSpec.file(Template(literal: "cert.bin")).bytes(variables: { _ in nil }, baseDirectory: r.inventory?.baseDirectory ?? "") == [9, 9])
        // Inside the new root only: the inventory's own directory is now outside.
        #expect(!(try line.validate(blob: "../line/blobs/ok.bin", extra: "files: { root: ../store }\n")).isValid)
        // A root that is not a directory is refused where it is written.
        let missing = try line.validate(blob: "cert.bin", extra: "files: { root: nowhere }\n")
        #expect(missing.errors.first?.message.hasPrefix("file root `nowhere` is not a directory") == true)
        #expect(missing.errors.first?.mark == SourceMark(line: 1, column: 16))
        #expect(missing.errors.first?.path == line.root + "/inventory.yaml")
    }

    @Test func allowEmptyGoesWithFile() {
        let r = WorkflowParser().parse(bytes: Array("""
            name: x
            steps:
              - connect: {}
              - write_blob: { service: FFF0, characteristic: FFF4, value: { hex: "01" }, allow_empty: true }
            """.utf8), path: "w.yaml")
        #expect(r.diagnostics.map(\.message) == ["`allow_empty` goes with `file`"])
    }
}
