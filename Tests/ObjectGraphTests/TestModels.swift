import Foundation
import ObjectGraph

/// The six-attribute "people" record of the benchmarks, as a macro-generated entity.
@Entity final class Person {
    var id: Int64
    var name: String
    var email: String
    var age: Int = 18
    var city: String?
    var score: Double = 0

    init(id: Int64, name: String, email: String) {
        self.id = id
        self.name = name
        self.email = email
    }
}

enum Priority: String, Codable, Sendable {
    case required, important, standard, optional, extra
}

enum Level: Int {
    case low = 1
    case high = 2
}

struct Checksum: Codable, Hashable {
    var algorithm: String
    var hex: String
}

/// An entity with one attribute of every supported kind.
@Entity final class Everything {
    var flag: Bool = false
    var i8: Int8 = 0
    var i16: Int16 = 0
    var i32: Int32 = 0
    var i64: Int64 = 0
    var int: Int = 0
    var u8: UInt8 = 0
    var u16: UInt16 = 0
    var u32: UInt32 = 0
    var u64: UInt64 = 0
    var uint: UInt = 0
    var double: Double = 0
    var float: Float = 0
    var text: String = ""
    var blob: Data = Data()
    var date: Date = Date(timeIntervalSinceReferenceDate: 0)
    var uuid: UUID = UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0))
    var url: URL?
    var priority: Priority = .standard
    var level: Level?
    var checksum: Checksum?
    var maybeText: String?
    var maybeInt: Int?
    @Transient var scratch: Int = 0
}

/// Counts lifecycle calls.
@Entity final class Tracked {
    var label: String = ""
    @Transient var awakeCount = 0

    func awakeFromInsert() {
        awakeCount += 1
    }
}

/// A model written without the macro, exactly as the README documents.
final class HandWritten: Entity {
    var _backing = ObjectBacking(entity: HandWritten.entityDescription)
    static let entityDescription = EntityDescription(
        name: "HandWritten", type: HandWritten.self,
        attributes: [
            .attribute("title", String.self, default: "untitled"),
            .attribute("pages", Int32.self, optional: true),
        ])
    init(_backing: ObjectBacking) { self._backing = _backing }

    var title: String {
        get { _backing.get(0, as: String.self) }
        set { _backing.set(0, newValue) }
    }
    var pages: Int32? {
        get { _backing.getOptional(1, as: Int32.self) }
        set { _backing.setOptional(1, newValue) }
    }
}

func makeContext(backend: (any PersistenceBackend)? = nil) throws -> ModelContext {
    ModelContext(schema: try Schema(Person.self, Everything.self, Tracked.self, HandWritten.self), backend: backend)
}

/// Records every change set, and fails on demand.
final class RecordingBackend: PersistenceBackend {
    struct InjectedFailure: Error {}
    var saved: [ChangeSet] = []
    var failNext = false

    func persist(_ changes: ChangeSet) throws {
        if failNext {
            failNext = false
            throw InjectedFailure()
        }
        saved.append(changes)
    }
}
