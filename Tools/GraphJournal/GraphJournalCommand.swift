import ArgumentParser
import Foundation

/// `graph-journal`: the operators' tool for ObjectGraph stores. It reads the schema the journal
/// records, so it needs none of the application's code.
@main
struct GraphJournalCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "graph-journal",
        abstract:
            "Inspects, checks, dumps, exports, repairs and compacts an ObjectGraph store, restores one from its JetStream stream and follows one, without the application's code.",
        discussion: """
            The read-only commands (stats, verify, dump, export) take no lock and never write to \
            the store, so they are safe on a store another process has open; export writes JSON \
            Lines or a SQLite database for standard tools. repair and compact take the store's write \
            lock; repair never deletes bytes (what it cuts is saved beside the segment) and asks \
            before acting. restore and follow read the JetStream stream a store ships its journal \
            to (ObjectGraphReplication): restore rebuilds the store in a new directory as of a \
            record or a time, follow keeps a read-only replica up to date.

            \(ToolExit.helpText)
            """,
        version: "1.0.0",
        subcommands: [
            Stats.self, Verify.self, Dump.self, Export.self, Repair.self, Compact.self, RestoreCommand.self,
            FollowCommand.self,
        ]
    )

    /// The subcommands' names, for the message about one that does not exist.
    static var subcommandNames: [String] { configuration.subcommands.map { $0._commandName } }

    /// Bad usage exits 64 with a message naming what is wrong: no subcommand at all, or a
    /// word that is not one (which the parser would report as "unexpected arguments").
    static func main() {
        let arguments = Array(CommandLine.arguments.dropFirst())
        guard let first = arguments.first else {
            exit(withError: ValidationError("missing subcommand: one of \(subcommandNames.joined(separator: ", "))"))
        }
        if !first.hasPrefix("-"), first != "help", !subcommandNames.contains(first) {
            exit(
                withError: ValidationError(
                    "unknown subcommand '\(first)': one of \(subcommandNames.joined(separator: ", "))"))
        }
        main(arguments)
    }
}
