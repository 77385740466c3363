import ArgumentParser

/// "Did you mean" for a mistyped subcommand, which swift-argument-parser reports only as an
/// unexpected argument.
enum CommandSuggestion {
    /// The message for the first word of `arguments` that names no subcommand where one is
    /// expected, or nil when the words name commands all the way to a leaf.
    static func check(_ arguments: [String], root: ParsableCommand.Type) -> String? {
        var command = root
        var path = [name(of: root)]
        for argument in arguments {
            guard !argument.hasPrefix("-"), argument != "help" else { return nil }
            let subcommands = command.configuration.subcommands
            guard !subcommands.isEmpty, command.configuration.defaultSubcommand == nil else { return nil }
            if let match = subcommands.first(where: { names(of: $0).contains(argument) }) {
                command = match
                path.append(argument)
                continue
            }
            let candidates = subcommands.filter { $0.configuration.shouldDisplay }.flatMap { names(of: $0) }
            let scored = candidates.map { ($0, distance(argument.lowercased(), $0)) }
                .filter {
                    $0.1 <= max(1, min(2, argument.count / 3))
                        || ($0.0.hasPrefix(argument.lowercased()) && argument.count >= 2)
                }
                .sorted { $0.1 < $1.1 }
            let where_ = path.joined(separator: " ")
            var message = "Unknown command '\(argument)' for '\(where_)'."
            if let best = scored.first { message += " Did you mean '\(best.0)'?" }
            return message + " ('\(where_) --help' lists them)"
        }
        return nil
    }

    static func name(of command: ParsableCommand.Type) -> String {
        command.configuration.commandName ?? String(describing: command).lowercased()
    }

    static func names(of command: ParsableCommand.Type) -> [String] {
        [name(of: command)] + command.configuration.aliases
    }

    /// Levenshtein distance.
    static func distance(_ a: String, _ b: String) -> Int {
        let a = Array(a)
        let b = Array(b)
        var previous = Array(0...b.count)
        for i in 1...max(1, a.count) where !a.isEmpty {
            var current = [i] + Array(repeating: 0, count: b.count)
            for j in 1...max(1, b.count) where !b.isEmpty {
                current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1))
            }
            previous = current
        }
        return a.isEmpty ? b.count : previous[b.count]
    }
}
