/// Chooses a deterministic, dependency-closed slice of a package index.
///
/// The rule (also printed by `--help`):
///
/// 1. Candidates are ordered by priority (required, important, standard, optional, extra,
///    then anything else), and within a priority by the 64-bit FNV-1a hash of the package name,
///    then by name. The hash spreads the slice over the whole alphabet and all sections while
///    staying the same on every machine and Swift version (unlike `Hasher`).
/// 2. Each candidate is admitted together with every package its `Depends` reach transitively
///    (first alternatives only; names that are not real packages in the index, such as virtual
///    packages, are skipped), but only if that closure adds at most `maxClosure` packages and
///    still fits in `count`. Otherwise the candidate is skipped.
/// 3. Selection stops when `count` packages are in.
///
/// So the base system comes first, and every dependency that names a real package of the
/// index resolves inside the slice.
struct SliceSelection {
    var records: [FixtureRecord]
    var count: Int
    var maxClosure: Int

    /// The rank of a `Priority` value; lower comes first.
    static func rank(_ priority: String?) -> Int {
        switch priority {
        case "required": 0
        case "important": 1
        case "standard": 2
        case "optional": 3
        case "extra": 4
        default: 5
        }
    }

    /// The 64-bit FNV-1a hash of the name's UTF-8 bytes.
    static func fnv1a(_ name: String) -> UInt64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in name.utf8 {
            hash ^= UInt64(byte)
            hash &*= 0x0000_0100_0000_01b3
        }
        return hash
    }

    /// The indices into `records` of the selected packages, sorted by package name.
    func select() -> [Int] {
        var indexByName: [String: Int] = [:]
        for (index, record) in records.enumerated() where indexByName[record.name] == nil {
            indexByName[record.name] = index
        }
        let order = indexByName.values.sorted { a, b in
            let (ra, rb) = (records[a], records[b])
            let keyA = (Self.rank(ra.priority), Self.fnv1a(ra.name))
            let keyB = (Self.rank(rb.priority), Self.fnv1a(rb.name))
            if keyA != keyB { return keyA < keyB }
            return ra.name < rb.name
        }

        var selected: Set<Int> = []
        for candidate in order {
            if selected.count >= count { break }
            if selected.contains(candidate) { continue }
            let limit = min(maxClosure, count - selected.count)
            guard
                let closure = closure(
                    of: candidate, excluding: selected, limit: limit,
                    indexByName: indexByName)
            else { continue }
            selected.formUnion(closure)
        }
        return selected.sorted { records[$0].name < records[$1].name }
    }

    /// The packages `start` reaches through `Depends` that are not in `excluding`, or nil when
    /// there are more than `limit` of them.
    private func closure(
        of start: Int, excluding: Set<Int>, limit: Int, indexByName: [String: Int]
    ) -> Set<Int>? {
        var found: Set<Int> = [start]
        var queue = [start]
        while let next = queue.popLast() {
            for name in records[next].depends {
                guard let dependency = indexByName[name],
                    !excluding.contains(dependency),
                    found.insert(dependency).inserted
                else { continue }
                if found.count > limit { return nil }
                queue.append(dependency)
            }
        }
        return found.count <= limit ? found : nil
    }
}
