import BLE
import Foundation

/// One device's secrets as every command hides them: the names that are secret (the inventory's
/// `secrets:`, the workflow's `secret: true` variables, and captures derived from them) and their
/// values in every rendering (`Redactor`). `run`'s records and messages and the one-device commands'
/// output (`read`, `write`, `subscribe`, `gatt`) decide what to hide by the same rules, here:
///
/// - a value under a secret name is hidden;
/// - a value whose text shows a secret in any form (hex either case, with separators, base64, the text
///   the bytes spell) is hidden;
/// - bytes a device read or sent are hidden when they show a secret in any form;
/// - bytes written from a value that uses a secret are secret too, in every form, from then on.
public struct SecretScope: Sendable {
    public private(set) var names: Set<String>
    public private(set) var redactor: Redactor

    public init(names: Set<String> = [], redactor: Redactor = Redactor(secrets: [String]())) {
        self.names = names
        self.redactor = redactor
    }

    /// The secrets of `device` (nil: a device not in the inventory, which has none) under the
    /// declarations of `inventory` and `workflow` (either may be absent).
    public init(inventory: Inventory?, workflow: Workflow?, device: InventoryDevice?) {
        var names = inventory?.secrets ?? []
        if let workflow { names.formUnion(workflow.secretVariables) }
        self.names = names
        redactor = Redactor(secrets: names.sorted().compactMap { device?.vars[$0] })
    }

    /// True when nothing is secret.
    public var isEmpty: Bool { names.isEmpty && redactor.isEmpty }

    /// `text` with every rendering of a secret replaced by `***`.
    public func redact(_ text: String) -> String { redactor.redact(text) }

    /// True when `text` shows a secret.
    public func reveals(_ text: String) -> Bool { !redactor.isEmpty && redactor.redact(text) != text }

    /// True when a value named `name` (nil: unnamed) shown as `text` must be hidden.
    public func hides(_ text: String, name: String? = nil) -> Bool {
        (name.map(names.contains) ?? false) || reveals(text)
    }

    /// True when bytes read from or written to a device show a secret: as hex, as the text they spell,
    /// or as base64.
    public func hides(bytes: [UInt8]) -> Bool {
        guard !redactor.isEmpty else { return false }
        if reveals(bytes.hexString) || reveals(Data(bytes).base64EncodedString()) { return true }
        return String(validating: bytes, as: UTF8.self).map(reveals) ?? false
    }

    /// A typed value as output shows it: its JSON, or `"***"` when it is hidden.
    public func shown(_ value: TypedValue, name: String? = nil) -> JSONScalar {
        hides(value.description, name: name) ? .string(Redactor.mask) : value.jsonScalar
    }

    /// True when `value` is made from a secret (it names one in a template).
    public func usesSecret(_ value: ValueSpec) -> Bool {
        value.templates.contains { $0.referencedNames.contains(where: names.contains) }
    }

    /// A value captured under `name`: when the name is secret, its value is a secret from now on.
    public mutating func captured(_ name: String, _ value: TypedValue) {
        if names.contains(name) { redactor.addSecret(value.description) }
    }

    /// Bytes written from `value`: when it is made from a secret, the bytes are a secret from now on.
    public mutating func wrote(_ bytes: [UInt8], from value: ValueSpec) {
        if usesSecret(value) { learn(bytes: bytes) }
    }

    /// Bytes known to be made from a secret: a secret from now on, in every rendering.
    public mutating func learn(bytes: [UInt8]) { redactor.add(bytes: bytes) }
}
