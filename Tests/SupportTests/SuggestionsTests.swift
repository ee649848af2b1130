import Testing
@testable import Support

@Suite struct SuggestionsTests {
    @Test func editDistanceCountsInsertionsDeletionsAndSubstitutions() {
        #expect(Suggestions.editDistance("", "") == 0)
        #expect(Suggestions.editDistance("", "abc") == 3)
        #expect(Suggestions.editDistance("abc", "") == 3)
        #expect(Suggestions.editDistance("kitten", "sitting") == 3)
        #expect(Suggestions.editDistance("charateristic", "characteristic") == 1)
        #expect(Suggestions.editDistance("inventory", "inventory") == 0)
    }

    @Test func aSwapOfNeighboursIsOneEdit() {
        #expect(Suggestions.editDistance("nmae", "name") == 1)
        #expect(Suggestions.editDistance("modle", "model") == 1)
        #expect(Suggestions.editDistance("inventroy", "inventory") == 1)
        // Optimal string alignment: a swapped pair is not edited again.
        #expect(Suggestions.editDistance("ca", "abc") == 3)
    }

    @Test func editDistanceIgnoresCaseAndCountsUnicodeScalars() {
        #expect(Suggestions.editDistance("NAME", "name") == 0)
        #expect(Suggestions.editDistance("Prüfung", "Prufung") == 1)
        #expect(Suggestions.editDistance("🔧", "🔨") == 1)
    }

    @Test func closestPicksAPlausibleTypo() {
        #expect(Suggestions.closest(to: "servce", in: ["service", "characteristic"]) == "service")
        #expect(Suggestions.closest(to: "valdate", in: ["run", "validate", "scan"]) == "validate")
        #expect(Suggestions.closest(to: "FFE8", in: ["FFE1", "FFE9"]) == "FFE1")
    }

    @Test func closestRefusesWordsTooFarFromEveryCandidate() {
        #expect(Suggestions.closest(to: "zzz", in: ["service"]) == nil)
        // Short words allow one edit only: `ab` is two from `xy`.
        #expect(Suggestions.closest(to: "ab", in: ["xy"]) == nil)
        // The shorter word sets the allowance (a third of it): `invntry` is two edits away and may be
        // meant; `invent` is three away, more than its six letters allow.
        #expect(Suggestions.closest(to: "inventory", in: ["invntry"]) == "invntry")
        #expect(Suggestions.closest(to: "inventory", in: ["invent"]) == nil)
        #expect(Suggestions.closest(to: "name", in: []) == nil)
    }

    @Test func aTieGoesToTheFirstCandidateInSortedOrder() {
        #expect(Suggestions.closest(to: "FFE5", in: ["FFE9", "FFE1"]) == "FFE1")
        #expect(Suggestions.closest(to: "FFE5", in: ["FFE1", "FFE9"]) == "FFE1")
    }

    @Test func aHugeWordGetsNoSuggestion() {
        let long = String(repeating: "a", count: 65)
        #expect(Suggestions.closest(to: long, in: [long]) == nil)
        let fits = String(repeating: "a", count: 64)
        #expect(Suggestions.closest(to: fits, in: [fits]) == fits)
    }

    @Test func hintSaysDidYouMean() {
        #expect(Suggestions.hint(for: "notfy", in: ["read", "write", "notify"]) == "did you mean `notify`?")
        #expect(Suggestions.hint(for: "zzz", in: ["read"]) == nil)
    }
}
