/// Every constant of the journal's on-disk format, in one place.
///
/// `Docs/JournalFormat.md` is the specification; this file and that document change together.
/// All integers are little-endian. A journal directory holds `LOCK`, `MANIFEST` and numbered
/// segment files (`0000000001.log`, `0000000007.base`).
///
/// Segment file = segment header (48 bytes), then records until end of file.
/// Record = record header (24 bytes), then `storedLength` payload bytes.
enum JournalFormat {
    // MARK: Versions and algorithms

    /// The format version written in the header of every new log segment: 2, whose
    /// transaction records may copy from the records before them (``flagHistory``). Base
    /// segments are written with ``historyFreeVersion``. Readers read both and refuse others.
    static let formatVersion: UInt16 = 2
    /// The version of a segment whose records are all self-contained: every segment written
    /// before version 2 existed, and every base segment.
    static let historyFreeVersion: UInt16 = 1
    /// The version of every segment an encrypted journal writes, logs and bases: its records
    /// may be sealed (``flagSealed``), and none uses a history, so that a sealed record is the
    /// same bytes in every journal it is shipped to.
    static let sealedVersion: UInt16 = 3
    /// The segment versions this code reads.
    static let readableVersions: ClosedRange<UInt16> = 1...3
    /// Checksum algorithm id 1: CRC32C (Castagnoli, reflected polynomial 0x82F63B78).
    static let checksumCRC32C: UInt8 = 1

    // MARK: Segment header (48 bytes)

    /// "OGJNL\r\n\u{1A}": the CR LF and Ctrl-Z catch text-mode mangling, as PNG's signature does.
    static let segmentMagic: [UInt8] = [0x4F, 0x47, 0x4A, 0x4E, 0x4C, 0x0D, 0x0A, 0x1A]
    static let segmentHeaderSize = 48
    enum SegmentHeaderField {
        static let magic = 0  // 8 bytes
        static let version = 8  // u16
        static let checksum = 10  // u8, checksum algorithm id
        static let kind = 11  // u8, SegmentKind
        static let flags = 12  // u32, must be 0
        static let salt = 16  // u64, random per file; seeds every record CRC
        static let number = 24  // u64, the file number in its name
        static let firstSequence = 32  // u64, sequence number of the file's first record
        static let reserved = 40  // u32, must be 0
        static let crc = 44  // u32, CRC32C of bytes 0..<44
    }
    enum SegmentKind: UInt8 {
        /// An append-only log of transaction and schema records (`NNNNNNNNNN.log`).
        case log = 1
        /// A compaction result: one schema record then base records (`NNNNNNNNNN.base`).
        case base = 2
    }

    // MARK: Record header (24 bytes)

    static let recordHeaderSize = 24
    enum RecordHeaderField {
        static let crc = 0  // u32, CRC32C(seed: salt) of bytes 4..<24 and the payload
        static let storedLength = 4  // u32, payload bytes on disk after the header
        static let sequence = 8  // u64, previous record's sequence + 1
        static let type = 16  // u8, RecordType or a skippable type
        static let flags = 17  // u8, RecordFlags
        static let reserved = 18  // u16, must be 0
        static let rawLength = 20  // u32, payload length after decompression
    }
    enum RecordType: UInt8 {
        case transaction = 1
        case base = 2
        case schema = 3
        /// Skippable: where, in a source the journal knows nothing of (a replicated stream),
        /// the data record after it came from; an opaque payload (see ``Journal/origin``).
        case origin = 0x80
    }
    /// Unknown record types in this range are skipped (forward compatibility); an unknown type
    /// outside it is corruption. Skipped records still take a sequence number.
    static let skippableRecordTypes: ClosedRange<UInt8> = 0x80...0xFF
    /// Record flag bit 0: the payload is one LZ4 block (`LZ4_compress_fast`, acceleration 1).
    static let flagCompressed: UInt8 = 0x01
    /// Record flag bit 1: the payload is in chunks compressed independently (``ChunkedPayload``):
    /// u32 count, count × u32 stored chunk lengths, then the chunks. Never with bit 0.
    static let flagChunked: UInt8 = 0x02
    /// Record flag bit 2 (version 2 segments, transaction and base records only): the payload
    /// is one LZ4 block that may copy from the segment's history (``RecordHistory``), the raw
    /// payloads of the records before it in the segment. Never with bit 0 or 1.
    static let flagHistory: UInt8 = 0x04
    /// Record flag bit 3: the payload is sealed (``SealFormat``): encrypted and authenticated,
    /// the stored form that bits 0 and 1 describe inside. Never with bit 2.
    static let flagSealed: UInt8 = 0x08
    static let knownRecordFlags: UInt8 = flagCompressed | flagChunked | flagHistory | flagSealed

    // MARK: Limits and policies

    /// Payloads shorter than this are stored raw: LZ4 cannot shrink them meaningfully.
    static let compressionThreshold = 64
    /// Payloads at least this long are stored chunked (``flagChunked``), so that several cores
    /// compress and decompress them.
    static let chunkedThreshold = 4 << 20
    /// The raw bytes of each chunk of a chunked payload (the last may be shorter).
    static let chunkSize = 1 << 20
    /// The raw bytes of the history a record's block may copy from: LZ4's 64 KiB window.
    static let historyWindow = 1 << 16
    /// Records of at most this many raw bytes join their segment's history (and may use it);
    /// larger ones neither join nor use it.
    static let historyRecordLimit = 1 << 16
    /// The largest payload one record may carry, before and after compression.
    static let maxPayloadSize = 1 << 30

    // MARK: Directory layout

    static let lockFileName = "LOCK"
    static let manifestFileName = "MANIFEST"
    static let temporarySuffix = ".tmp"
    static let logExtension = "log"
    static let baseExtension = "base"
    /// `<segment>.dropped-<UTC timestamp>`: bytes removed by point-in-time recovery. Never deleted.
    static let droppedInfix = ".dropped-"
    /// Segment file names are the file number in decimal, zero-padded to this many digits.
    static let fileNumberDigits = 10
    /// Mode of every file the journal creates.
    static let fileMode: UInt32 = 0o600
    /// Mode of the journal directory when the journal creates it.
    static let directoryMode: UInt32 = 0o700

    // MARK: MANIFEST (text, UTF-8, LF line ends)

    /// First line of MANIFEST. Then `base <name>` (at most one, first), `log <name>` (one or
    /// more, in order; the last is the active segment), and last `crc32c <8 hex digits>`: the
    /// CRC32C of every byte before that line.
    static let manifestHeaderLine = "objectgraph-journal-manifest 1"
}
