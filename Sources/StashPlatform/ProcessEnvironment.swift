#if canImport(Glibc)
    import Glibc
#endif

/// One variable of the process's environment, read where it is asked for: Foundation's
/// `ProcessInfo.environment` builds a dictionary of them all, and its first use costs every
/// command about a millisecond before the arguments are parsed.
public enum ProcessEnvironment {
    /// The variable's value, nil when unset; bytes that are not UTF-8 are replaced, as
    /// `ProcessInfo` does.
    ///
    /// A variable defined twice (only `execve` can do that) reads as its last definition, as in
    /// `ProcessInfo.environment` and so in every child's environment; `getenv` gives the first.
    public static func value(_ name: String) -> String? {
        name.withCString { key -> String? in
            let length = strlen(key)
            var value: UnsafeMutablePointer<CChar>?
            var entry: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = environ   // NULL after clearenv()
            while let definition = entry?.pointee {
                if strncmp(definition, key, length) == 0, definition[length] == CChar(UInt8(ascii: "=")) {
                    value = definition + length + 1
                }
                entry = entry.map { $0 + 1 }
            }
            return value.map { String(cString: $0) }
        }
    }
}
