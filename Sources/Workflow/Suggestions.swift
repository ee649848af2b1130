/// "Did you mean ...?" suggestions from edit distance.
public enum Suggestions {
    /// The Levenshtein distance between two strings (case-insensitive), capped for speed.
    public static func editDistance(_ a: String, _ b: String) -> Int {
        let x = Array(a.lowercased().unicodeScalars)
        let y = Array(b.lowercased().unicodeScalars)
        if x.isEmpty { return y.count }
        if y.isEmpty { return x.count }
        var previous = Array(0...y.count)
        var current = [Int](repeating: 0, count: y.count + 1)
        for i in 1...x.count {
            current[0] = i
            for j in 1...y.count {
                let cost = x[i - 1] == y[j - 1] ? 0 : 1
                current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + cost)
            }
            swap(&previous, &current)
        }
        return previous[y.count]
    }

    /// The closest candidate if it is close enough to be a plausible typo (distance ≤ max(1, len/3)).
    public static func closest(to word: String, in candidates: some Sequence<String>) -> String? {
        var best: (String, Int)?
        for c in candidates {
            let d = editDistance(word, c)
            if let current = best, current.1 <= d { continue }
            best = (c, d)
        }
        guard let (candidate, distance) = best else { return nil }
        let allowed = max(1, min(word.count, candidate.count) / 3)
        return distance <= allowed ? candidate : nil
    }

    /// `did you mean `x`?` or nil.
    static func hint(for word: String, in candidates: some Sequence<String>) -> String? {
        closest(to: word, in: candidates).map { "did you mean `\($0)`?" }
    }
}
