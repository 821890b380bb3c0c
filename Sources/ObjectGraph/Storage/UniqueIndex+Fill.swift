extension UniqueIndex {
    /// Takes `buckets` (filled by an ``IndexFillJob``) as the index's.
    func install(buckets: [Int32], used: Int, duplicates: [Int32]) {
        self.buckets = buckets
        self.used = used
        self.duplicates = Set(duplicates)
        changes += 1
        filledDuringReplay = true
    }
}
