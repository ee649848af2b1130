import BLESecurity

/// The encryption of a protocomm session once its handshake is done, as a value.
///
/// - Security 0: none.
/// - Security 1: AES-256-CTR with the shared key and the device's 16-byte random as the first counter
///   block: one keystream for the whole session, used by both directions in the order the bytes pass
///   (ESP-IDF's security1.c and esp_prov's `Security1` each keep one CTR context).
/// - Security 2: AES-256-GCM with the first 32 bytes of K and the device's 12-byte nonce, the tag after
///   the ciphertext. From security patch version 1 the nonce's last 4 bytes count every message
///   (big-endian, both directions); before it the nonce never changes.
///
/// Both ends use the same value: the host encrypts its requests and decrypts the answers, a device (the
/// simulator's ESP model) the other way round, and their states stay in step.
public struct ProtocommCipher: Sendable, Equatable, CustomStringConvertible, CustomReflectable {
    enum Mode: Sendable, Equatable {
        case plaintext
        case ctr(key: [UInt8], iv: [UInt8], offset: UInt64)
        case gcm(key: [UInt8], nonce: [UInt8], counting: Bool)
    }

    private(set) var mode: Mode

    /// No encryption (security 0).
    public static let plaintext = ProtocommCipher(mode: .plaintext)

    /// Security 1's keystream (`key` 32 bytes, `iv` 16).
    public static func ctr(key: [UInt8], iv: [UInt8]) -> ProtocommCipher {
        ProtocommCipher(mode: .ctr(key: key, iv: iv, offset: 0))
    }

    /// Security 2's AEAD (`key` 32 bytes, `nonce` 12).
    public static func gcm(key: [UInt8], nonce: [UInt8], patchVersion: Int) -> ProtocommCipher {
        ProtocommCipher(mode: .gcm(key: key, nonce: nonce, counting: patchVersion >= 1))
    }

    /// Encrypts one message (a request on the host, a response on a device).
    public mutating func encrypt(_ data: [UInt8]) throws(ProtocommError) -> [UInt8] {
        try apply(data, sealing: true)
    }

    /// Decrypts one message; a GCM tag that does not verify is a `protocolError` and the state is unchanged.
    public mutating func decrypt(_ data: [UInt8]) throws(ProtocommError) -> [UInt8] {
        try apply(data, sealing: false)
    }

    private mutating func apply(_ data: [UInt8], sealing: Bool) throws(ProtocommError) -> [UInt8] {
        do {
            switch mode {
            case .plaintext:
                return data
            case .ctr(let key, let iv, let offset):
                let out = try ESPCrypto.aes256CTR(key: key, iv: iv, offset: offset, data)
                mode = .ctr(key: key, iv: iv, offset: offset + UInt64(data.count))
                return out
            case .gcm(let key, let nonce, let counting):
                let out = sealing ? try ESPCrypto.aes256GCMSeal(key: key, nonce: nonce, data)
                                  : try ESPCrypto.aes256GCMOpen(key: key, nonce: nonce, data)
                if counting {
                    let counter = nonce.suffix(4).reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
                    guard counter < UInt32.max else {
                        throw ProtocommError(.protocolError, "the session's nonce counter is used up; start a new session")
                    }
                    let next = counter + 1
                    mode = .gcm(key: key, nonce: nonce.prefix(8) + [UInt8(next >> 24), UInt8(truncatingIfNeeded: next >> 16),
                                                                    UInt8(truncatingIfNeeded: next >> 8), UInt8(truncatingIfNeeded: next)],
                                counting: true)
                }
                return out
            }
        } catch let e as CryptoError {
            throw .crypto(e)
        } catch let e as ProtocommError {
            throw e
        } catch {
            throw ProtocommError(.protocolError, "\(error)")
        }
    }

    public var description: String {
        switch mode {
        case .plaintext: "ProtocommCipher(plaintext)"
        case .ctr: "ProtocommCipher(AES-256-CTR, key hidden)"
        case .gcm: "ProtocommCipher(AES-256-GCM, key hidden)"
        }
    }

    public var customMirror: Mirror { Mirror(self, children: [:]) }
}
