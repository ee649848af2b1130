import Testing
@testable import Workflow

@Suite struct SemanticVersionTests {
    private func v(_ text: String) throws -> SemanticVersion { try SemanticVersion(parsing: text) }

    @Test func numericComponentsCompareAsNumbersNotText() throws {
        #expect(try v("10.0.0") > v("2.0"))
        #expect(try v("2.10.0") > v("2.9.9"))
        #expect(try v("1.0.10") > v("1.0.9"))
    }

    @Test func missingComponentsAreZero() throws {
        #expect(try v("2.0") == v("2.0.0"))
        #expect(try v("2") == v("2.0.0.0"))
        #expect(try v("2.0").hashValue == v("2.0.0").hashValue)
        #expect(try v("2") < v("2.0.1"))
        #expect(try !(v("2.0.0") < v("2.0")))
        #expect(Set([try v("2.0"), try v("2.0.0"), try v("v2")]).count == 1)
    }

    @Test func aLeadingVAndLeadingZerosDoNotMatter() throws {
        #expect(try v("v10.0.0") == v("10.0.0"))
        #expect(try v("V2.4.1") == v("2.4.1"))
        #expect(try v("2.04") == v("2.4"))
        #expect(try v("v10.0.0").text == "v10.0.0")
    }

    @Test func aPreReleaseSortsBeforeItsRelease() throws {
        #expect(try v("1.9.0-rc1") < v("1.9.0"))
        #expect(try v("1.9.0-rc1") > v("1.8.9"))
        #expect(try v("2.0-rc1") < v("2.0.0"))
        #expect(try v("1.9.0-rc1") != v("1.9.0"))
    }

    @Test func preReleasesFollowTheSemVerOrder() throws {
        // SemVer 2.0.0 §11's example chain.
        let chain = ["1.0.0-alpha", "1.0.0-alpha.1", "1.0.0-alpha.beta", "1.0.0-beta", "1.0.0-beta.2",
                     "1.0.0-beta.11", "1.0.0-rc.1", "1.0.0"]
        let versions = try chain.map(v)
        for (a, b) in zip(versions, versions.dropFirst()) {
            #expect(a < b, "\(a) < \(b)")
            #expect(!(b < a), "not \(b) < \(a)")
        }
        #expect(try v("1.0.0-rc10") < v("1.0.0-rc2"), "alphanumeric identifiers compare by ASCII")
        #expect(try v("1.0.0-2") < v("1.0.0-10"), "numeric identifiers compare as numbers")
    }

    @Test func buildMetadataIsKeptButIgnoredByTheOrder() throws {
        let a = try v("2.4.1+build.7")
        #expect(a.build == "build.7")
        #expect(a == (try v("2.4.1")))
        #expect(a == (try v("2.4.1+other")))
        #expect(a.preRelease.isEmpty)
        let b = try v("1.0.0-rc.1+sha.5114f85")
        #expect(b.preRelease == [.alphanumeric("rc"), .numeric(1)])
        #expect(b.build == "sha.5114f85")
    }

    @Test func componentsAreKeptAsWritten() throws {
        #expect(try v("2.4.1").components == [2, 4, 1])
        #expect(try v("2.0").components == [2, 0])
        #expect(try v("18446744073709551615").components == [UInt64.max])
    }

    @Test(arguments: [
        ("", "it has no numeric components"),
        ("v", "it has no numeric components"),
        ("2..1", "component 2 is empty"),
        ("2.4.", "component 3 is empty"),
        (".2", "component 1 is empty"),
        ("2.x.1", "component 2 (\"x\") is not a number"),
        ("2.4.1 (build 7)", "is not a number"),
        (" 2.4.1", "is not a number"),
        ("2.-1", "component 2 is empty"),
        ("1.0.0-", "its pre-release has an empty identifier"),
        ("1.0.0-rc..1", "its pre-release has an empty identifier"),
        ("1.0.0-rc_1", "may hold only letters, digits"),
        ("1.0.0+", "its build metadata has an empty identifier"),
        ("1.2.3.4.5.6.7.8.9", "more than 8 components"),
        ("18446744073709551616", "component 1 is too large"),
        ("firmware", "is not a number"),
        ("2.4.1\u{301}", "is not a number"),
    ])
    func whatIsNotAVersionIsAClearError(text: String, reason: String) {
        do {
            _ = try SemanticVersion(parsing: text)
            Issue.record("\"\(text)\" parsed as a version")
        } catch {
            #expect(error.message.contains("is not a version"), "\(error.message)")
            #expect(error.message.contains(reason), "\(error.message)")
        }
    }

    @Test func aHugeNonVersionGivesAShortMessage() {
        let text = String(repeating: "9.", count: 100_000)
        do {
            _ = try SemanticVersion(parsing: text)
            Issue.record("parsed")
        } catch {
            #expect(error.message.count < 200)
        }
        #expect(SemanticVersion(String(repeating: "x", count: 100_000)) == nil)
    }
}
