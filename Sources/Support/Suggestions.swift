/// "Did you mean ...?" suggestions from edit distance: the one rule every unknown key, option,
/// command, step, model, property or field name is checked with.
package enum Suggestions {
    /// The edit distance between two strings (case-insensitive, over Unicode scalars): insertions,
    /// deletions, substitutions and swaps of two neighbours (optimal string alignment), so `nmae` is
    /// one edit from `name`.
    package static func editDistance(_ a: String, _ b: String) -> Int {
        let x = Array(a.lowercased().unicodeScalars)
        let y = Array(b.lowercased().unicodeScalars)
        if x.isEmpty { return y.count }
        if y.isEmpty { return x.count }
        let width = y.count + 1
        var d = [Int](repeating: 0, count: (x.count + 1) * width)
        for i in 0...x.count { d[i * width] = i }
        for j in 0...y.count { d[j] = j }
        for i in 1...x.count {
            for j in 1...y.count {
                let cost = x[i - 1] == y[j - 1] ? 0 : 1
                var v = min(d[(i - 1) * width + j] + 1, d[i * width + j - 1] + 1, d[(i - 1) * width + j - 1] + cost)
                if i > 1, j > 1, x[i - 1] == y[j - 2], x[i - 2] == y[j - 1] {
                    v = min(v, d[(i - 2) * width + j - 2] + 1)
                }
                d[i * width + j] = v
            }
        }
        return d[x.count * width + y.count]
    }

    /// The closest candidate if it is close enough to be a plausible typo (distance ≤ max(1, len/3),
    /// len being the shorter of the two); on a tie, the candidate first in sorted order. Words over 64
    /// bytes get no suggestion.
    package static func closest(to word: String, in candidates: some Sequence<String>) -> String? {
        // A typo is short; comparing a huge (hostile) word would only burn time.
        guard word.utf8.count <= 64 else { return nil }
        var best: (String, Int)?
        for c in candidates.sorted() {
            let d = editDistance(word, c)
            if let current = best, current.1 <= d { continue }
            best = (c, d)
        }
        guard let (candidate, distance) = best else { return nil }
        let allowed = max(1, min(word.count, candidate.count) / 3)
        return distance <= allowed ? candidate : nil
    }

    /// ``did you mean `x`?`` for the closest candidate, or nil.
    package static func hint(for word: String, in candidates: some Sequence<String>) -> String? {
        closest(to: word, in: candidates).map { "did you mean `\($0)`?" }
    }
}
