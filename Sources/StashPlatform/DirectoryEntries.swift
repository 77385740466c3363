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
            let name = Self.name(of: entry)
            if name != ".", name != ".." { names.append(name) }
        }
        return names
    }

    /// An entry's name, read in place: a record may end before the 256 bytes `d_name` declares.
    public static func name(of entry: UnsafeMutablePointer<dirent>) -> String {
        let offset = MemoryLayout<dirent>.offset(of: \dirent.d_name)!
        return String(cString: UnsafeRawPointer(entry).advanced(by: offset).assumingMemoryBound(to: CChar.self))
    }
}
