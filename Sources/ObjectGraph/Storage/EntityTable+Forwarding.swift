// The parts' state that the persistence code (Persistence/) and the snapshot code
// (Concurrency/) reach on a table, under the names they use. Everything else goes through the
// part (`table.identity.liveCount`). The accessors are inlined: they cost nothing over a
// stored property.

extension EntityTable {
    /// ``TableIdentity/serialOfRow``.
    var serialOfRow: CountingArray<UInt64> {
        @inline(__always) _read { yield identity.serialOfRow }
    }

    /// ``TableIdentity/rowOfSerial``.
    var rowOfSerial: CountingArray<Int32> {
        @inline(__always) _read { yield identity.rowOfSerial }
    }

    /// ``TableIdentity/nextSerial``.
    var nextSerial: UInt64 {
        @inline(__always) get { identity.nextSerial }
        @inline(__always) set { identity.nextSerial = newValue }
    }

    /// ``TableIdentity/freeRows``.
    var freeRows: [Int32] {
        @inline(__always) _read { yield identity.freeRows }
    }

    /// ``TableIdentity/liveCount``.
    var liveCount: Int {
        @inline(__always) get { identity.liveCount }
    }

    /// ``TableChangeLog/committedArenaCount``.
    var committedArenaCount: Int {
        @inline(__always) get { changes.committedArenaCount }
        @inline(__always) set { changes.committedArenaCount = newValue }
    }

    /// ``TableChangeLog/committedGarbage``.
    var committedGarbage: Int {
        @inline(__always) get { changes.committedGarbage }
        @inline(__always) set { changes.committedGarbage = newValue }
    }

    /// ``TableIndexes/uniqueIndexes``.
    var uniqueIndexes: [UniqueIndex] {
        @inline(__always) _read { yield indexes.uniqueIndexes }
    }

    /// ``TableIndexes/referenceSlots``.
    var referenceSlots: [Int] {
        @inline(__always) _read { yield indexes.referenceSlots }
    }

    /// ``TableIndexes/indexFillJobs``.
    var indexFillJobs: [IndexFillJob] {
        @inline(__always) _read { yield indexes.indexFillJobs }
        @inline(__always) _modify { yield &indexes.indexFillJobs }
    }
}
