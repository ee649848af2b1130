@testable import Workflow

/// The message of the `ValueError` that `body` throws (another error's description), or nil when it
/// does not throw: for asserting on the exact text a user reads.
func message(_ body: () throws -> Any) -> String? {
    do {
        _ = try body()
        return nil
    } catch let error as ValueError {
        return error.message
    } catch {
        return "\(error)"
    }
}
