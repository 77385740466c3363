#if canImport(Glibc)
    import Glibc
#endif

/// The names in a directory, read with readdir: for the paths every command takes, where
/// FileManager's first use costs about half a millisecond.
public enum DirectoryEntries {
    /// Every name but `.` and `..`; nil when the directory cannot be read (`errno` says why).
    public static func names(in directory: String) -> [String]? {
        guard let stream = opendir(directory) else { return nil }
        defer { closedir(stream) }
        var names: [String] = []
        while let entry = readdir(stream) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) {
                String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self)
            }
            if name != ".", name != ".." { names.append(name) }
        }
        return names
    }
}
