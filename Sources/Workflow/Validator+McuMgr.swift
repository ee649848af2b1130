import YAML
import MCUboot

/// What validation learned about an image file: its version, hash and size, or why it cannot be sent.
typealias ImageFacts = Result<(version: ImageVersion, hash: [UInt8], size: Int), ValueError>

extension Validator {
    /// MCUboot images (`dfu`, `mcumgr` image_test / image_confirm): the file each device's variable names
    /// must lie inside the inventory's file root, be an MCUboot image whose SHA-256 TLV matches its
    /// contents, and carry the version the step names, if it names one.
    static func checkImages(_ step: Step, path: String, inventory: Inventory, devices: [InventoryDevice], captured: Set<String>,
                            images: inout [String: ImageFacts]) -> [Diagnostic] {
        let image: Template?
        var version: Template?
        switch step.kind {
        case .dfu(let d):
            image = d.image
            version = d.version
        case .mcumgr(let m): image = m.image
        default: image = nil
        }
        guard let image, image.referencedNames.allSatisfy({ !captured.contains($0) }) else { return [] }
        if let v = version, !v.referencedNames.allSatisfy({ !captured.contains($0) }) { version = nil }
        var out: [Diagnostic] = []
        var failures: [(InventoryDevice, String)] = []
        var wrongVersion: [(InventoryDevice, String)] = []
        for device in devices {
            guard let rendered = try? image.render({ device.value(of: $0) }) else { continue }
            let facts = images[rendered] ?? Self.imageFacts(rendered, root: FileRoot(inventory.baseDirectory))
            images[rendered] = facts
            switch facts {
            case .failure(let e):
                failures.append((device, e.message))
            case .success(let f):
                guard let version, let text = try? version.render({ device.value(of: $0) }) else { continue }
                guard let wanted = ImageVersion(text) else {
                    wrongVersion.append((device, "`\(text)` is not an image version (1.2.3 or 1.2.3.4)"))
                    continue
                }
                if wanted != f.version {
                    wrongVersion.append((device, "\(rendered) is version \(f.version), not \(wanted)"))
                }
            }
        }
        if let first = failures.first {
            out.append(Diagnostic(
                path: path, mark: image.references.first?.mark ?? step.mark,
                message: "step `\(step.name)`: the image cannot be sent to \(failures.count) device\(failures.count == 1 ? "" : "s") (\(idList(failures.map(\.0)))): \(first.1)",
                hint: "name an MCUboot image (imgtool sign) inside the inventory's file root (\(inventory.baseDirectory.isEmpty ? "." : inventory.baseDirectory)); \(first.0.id) is at \(inventory.path):\(first.0.mark)"))
        }
        if let first = wrongVersion.first, let version {
            out.append(Diagnostic(
                path: path, mark: version.references.first?.mark ?? step.mark,
                message: "step `\(step.name)`: the image does not have the version the step names for \(wrongVersion.count) device\(wrongVersion.count == 1 ? "" : "s") (\(idList(wrongVersion.map(\.0)))): \(first.1)",
                hint: "build the image with that version (imgtool sign --version), or fix `version`; \(first.0.id) is at \(inventory.path):\(first.0.mark)"))
        }
        return out
    }

    /// Reads and checks an image through the file root (the same confinement as blobs).
    static func imageFacts(_ rendered: String, root: FileRoot) -> ImageFacts {
        do {
            let bytes = try root.read(rendered)
            do {
                let image = try MCUbootImage(bytes: bytes)
                return .success((image.version, image.hash, bytes.count))
            } catch {
                return .failure(ValueError("\(rendered): \(error)"))
            }
        } catch {
            return .failure(error)
        }
    }
}
