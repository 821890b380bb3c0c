import Foundation
import ObjectGraph
import PropertyBased
import Testing

/// The reference model of the relationship property test: which folders and teams exist, and
/// which folder each file and which team each member points at.
private struct GraphModel: Equatable {
    var folders: Set<UInt64> = []
    var files: [UInt64: UInt64?] = [:]
    var teams: Set<UInt64> = []
    var members: [UInt64: UInt64?] = [:]

    mutating func deleteFolder(_ s: UInt64) {  // cascade
        folders.remove(s)
        files = files.filter { $0.value != s }
    }

    mutating func deleteTeam(_ s: UInt64) {  // nullify
        teams.remove(s)
        for (m, t) in members where t == s { members[m] = .some(nil) }
    }
}

@Suite("Property: relationships and cascades against a reference model")
struct RelationshipPropertyTests {
    @Test func randomRelationshipOperationsKeepInversesConsistentAndMatchTheModel() async {
        await propertyCheck(count: propertyRuns, input: Gen.int(in: 0...1_000_000).array(of: 1...80)) { codes in
            do {
                try run(codes)
            } catch {
                Issue.record("unexpected error: \(error)")
            }
        }
    }

    private struct Stop: Error {}

    private func run(_ codes: [Int]) throws {
        let backend = RecordingBackend()
        let schema = try Schema(Folder.self, FileItem.self, Team.self, TeamMember.self)
        let c = ModelContext(schema: schema, backend: backend)
        var model = GraphModel(), committed = GraphModel()

        func pick<T: Entity>(_ keys: some Collection<UInt64>, _ arg: Int, _ type: T.Type) -> (UInt64, T)? {
            let sorted = keys.sorted()
            guard !sorted.isEmpty else { return nil }
            let s = sorted[arg % sorted.count]
            guard let o = c.object(with: ObjectID(entityName: T.entityDescription.name, serial: s), as: T.self) else {
                Issue.record("\(T.self)/\(s) is missing")
                return nil
            }
            return (s, o)
        }

        func step(_ op: Int, _ arg: Int) throws {
            switch op {
            case 0:
                let f = try c.insert(Folder.self)
                model.folders.insert(f.objectID?.serial ?? 0)
            case 1, 2:
                let file: FileItem
                if op == 1 {
                    file = try c.insert(FileItem.self)
                    model.files[file.objectID?.serial ?? 0] = .some(nil)
                } else {
                    guard let (_, f) = pick(model.files.keys, arg, FileItem.self) else { return }
                    file = f
                }
                let target = arg % 3 == 0 ? nil : pick(model.folders, arg / 3, Folder.self)
                file.folder = target?.1
                model.files[file.objectID?.serial ?? 0] = .some(target?.0)
            case 3:
                guard let (s, folder) = pick(model.folders, arg, Folder.self) else { return }
                let keys = model.files.keys.sorted()
                let chosen = keys.enumerated().filter { (arg >> ($0.offset % 20)) & 1 == 1 }.map(\.element)
                folder.files = chosen.compactMap {
                    c.object(with: ObjectID(entityName: "FileItem", serial: $0), as: FileItem.self)
                }
                for (f, owner) in model.files where owner == s && !chosen.contains(f) { model.files[f] = .some(nil) }
                for f in chosen { model.files[f] = .some(s) }
            case 4:
                guard let (s, folder) = pick(model.folders, arg, Folder.self) else { return }
                c.delete(folder)
                model.deleteFolder(s)
            case 5:
                guard let (s, file) = pick(model.files.keys, arg, FileItem.self) else { return }
                c.delete(file)
                model.files[s] = nil
            case 6:
                let t = try c.insert(Team.self)
                model.teams.insert(t.objectID?.serial ?? 0)
            case 7:
                let m = try c.insert(TeamMember.self)
                let target = arg % 2 == 0 ? nil : pick(model.teams, arg / 2, Team.self)
                m.team = target?.1
                model.members[m.objectID?.serial ?? 0] = .some(target?.0)
            case 8:
                guard let (_, m) = pick(model.members.keys, arg, TeamMember.self) else { return }
                let target = arg % 3 == 0 ? nil : pick(model.teams, arg / 3, Team.self)
                m.team = target?.1
                model.members[m.objectID?.serial ?? 0] = .some(target?.0)
            case 9:
                guard let (s, t) = pick(model.teams, arg, Team.self) else { return }
                c.delete(t)
                model.deleteTeam(s)
            case 10:
                guard let (s, m) = pick(model.members.keys, arg, TeamMember.self) else { return }
                c.delete(m)
                model.members[s] = nil
            case 11:
                try c.save()
                committed = model
            case 12:
                c.rollback()
                model = committed
            default:
                // A transaction that changes something and throws undoes exactly its changes.
                let before = model
                do {
                    try c.transaction { _ in
                        try step(arg % 11, arg / 11)
                        throw Stop()
                    }
                } catch is Stop {}
                model = before
            }
        }

        for (n, code) in codes.enumerated() {
            let op = code % 14
            try step(op, code / 14)
            check(c, model, "step \(n) (op \(op))")
        }

        // Replaying what was saved gives the committed state.
        let replayed = ModelContext(schema: schema)
        for changes in backend.saved { try replayed.apply(changes) }
        check(replayed, committed, "replay")
    }

    private func check(_ c: ModelContext, _ model: GraphModel, _ at: String) {
        let folders = (try? c.objects(of: Folder.self)) ?? []
        let files = (try? c.objects(of: FileItem.self)) ?? []
        let teams = (try? c.objects(of: Team.self)) ?? []
        let members = (try? c.objects(of: TeamMember.self)) ?? []
        var actual = GraphModel()
        actual.folders = Set(folders.compactMap { $0.objectID?.serial })
        actual.teams = Set(teams.compactMap { $0.objectID?.serial })
        for f in files { actual.files[f.objectID?.serial ?? 0] = .some(f.folder?.objectID?.serial) }
        for m in members { actual.members[m.objectID?.serial ?? 0] = .some(m.team?.objectID?.serial) }
        #expect(actual == model, "\(at): the context differs from the reference model")
        // Every inverse agrees, and nothing reachable from a live object is deleted.
        for folder in folders {
            let mine = Set(model.files.filter { $0.value == folder.objectID?.serial }.keys)
            #expect(
                Set(folder.files.compactMap { $0.objectID?.serial }) == mine,
                "\(at): \(String(describing: folder.objectID)).files")
            #expect(
                folder.files.allSatisfy { !$0.isDeleted && $0.folder === folder },
                "\(at): a file of \(String(describing: folder.objectID))")
        }
        for team in teams {
            let mine = Set(model.members.filter { $0.value == team.objectID?.serial }.keys)
            #expect(
                Set(team.members.compactMap { $0.objectID?.serial }) == mine,
                "\(at): \(String(describing: team.objectID)).members")
        }
        #expect(
            files.allSatisfy { $0.folder?.isDeleted != true } && members.allSatisfy { $0.team?.isDeleted != true },
            "\(at): a live object reaches a deleted one")
    }
}
