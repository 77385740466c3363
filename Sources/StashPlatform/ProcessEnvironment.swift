#if canImport(Glibc)
    import Glibc
#endif

/// One variable of the process's environment, read where it is asked for: Foundation's
/// `ProcessInfo.environment` builds a dictionary of them all, and its first use costs every
/// command about a millisecond before the arguments are parsed.
public enum ProcessEnvironment {
    /// The variable's value, nil when unset; bytes that are not UTF-8 are replaced, as
    /// `ProcessInfo` does.
    public static func value(_ name: String) -> String? {
        getenv(name).map { String(cString: $0) }
    }
}
