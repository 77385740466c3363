import Foundation

/// One line of a list: a note or a password entry, with the texts a filter looks in.
struct BrowseRow: Equatable {
    var id: Int64
    var title: String
    var subtitle: String
    var section: String
    var searchable: [String?]

    /// The searchable texts folded, as a filter compares them, each after a 0x01.
    var searchText: [UInt8] {
        var text: [UInt8] = []
        text.reserveCapacity(searchable.reduce(0) { $0 + ($1?.utf8.count ?? 0) + 1 })
        for case var part? in searchable {
            text.append(1)
            // ASCII folds byte by byte: a first filter over 100,000 rows folds them all.
            let start = text.count
            part.withUTF8 { bytes in
                for byte in bytes { text.append(byte &- 0x41 < 26 ? byte | 0x20 : byte) }
            }
            if text[start...].contains(where: { $0 >= 0x80 }) {
                text.removeSubrange(start...)
                text.append(contentsOf: BrowseList.folded(part).utf8)
            }
        }
        return text
    }
}

/// The rows of one tab in sections (the order they come in), narrowed by a filter, with a
/// selection that stays on the same item across filtering and reloads where it can.
struct BrowseList {
    /// A line on screen: a section header or a row.
    enum Line: Equatable {
        case header(String, count: Int)
        case row(BrowseRow)
    }

    private var allRows: [BrowseRow] = []
    /// Each row's ``BrowseRow/searchText``, made by ``prepareSearch()``.
    private var searchTexts: [[UInt8]]?
    private(set) var filter = ""
    private(set) var visibleRows: [BrowseRow] = []
    private(set) var lines: [Line] = []
    /// For each visible row, the index of its line.
    private(set) var lineOfRow: [Int] = []
    private(set) var selectedIndex = 0
    /// False until the first load, and again after locking.
    private(set) var isLoaded = false

    var totalCount: Int { allRows.count }
    var selectedRow: BrowseRow? { visibleRows.indices.contains(selectedIndex) ? visibleRows[selectedIndex] : nil }

    /// New rows (already in section order); the selection follows its item, else keeps its place.
    mutating func replaceRows(_ rows: [BrowseRow]) {
        allRows = rows
        searchTexts = nil
        isLoaded = true
        refilter(keeping: selectedRow?.id)
    }

    /// Drops every row (their decrypted text with them).
    mutating func clear() {
        self = BrowseList()
    }

    mutating func setFilter(_ text: String) {
        guard text != filter else { return }
        filter = text
        refilter(keeping: selectedRow?.id)
    }

    mutating func move(by offset: Int) {
        guard !visibleRows.isEmpty else { return }
        selectedIndex = min(max(0, selectedIndex + offset), visibleRows.count - 1)
    }

    mutating func select(id: Int64) {
        if let index = visibleRows.firstIndex(where: { $0.id == id }) { selectedIndex = index }
    }

    /// Folds every row's search text unless done since the rows came: browse does it once a
    /// frame is drawn, so the first paint does not wait for it, nor (mostly) the first filter.
    mutating func prepareSearch() {
        if searchTexts == nil { searchTexts = allRows.map(\.searchText) }
    }

    private mutating func refilter(keeping id: Int64?) {
        let words = Self.folded(filter).split(separator: " ").map { Array($0.utf8) }
        let previousIndex = selectedIndex
        if words.isEmpty {
            visibleRows = allRows
        } else {
            prepareSearch()
            let texts = searchTexts ?? []
            visibleRows = allRows.indices.filter { row in words.allSatisfy { Self.contains(texts[row], $0) } }
                .map { allRows[$0] }
        }
        lines = []
        lineOfRow = []
        lines.reserveCapacity(visibleRows.count + 16)
        lineOfRow.reserveCapacity(visibleRows.count)
        var start = 0
        while start < visibleRows.count {
            let section = visibleRows[start].section
            var end = start + 1
            while end < visibleRows.count, visibleRows[end].section == section { end += 1 }
            lines.append(.header(section, count: end - start))
            for row in visibleRows[start..<end] {
                lineOfRow.append(lines.count)
                lines.append(.row(row))
            }
            start = end
        }
        if let id, let index = visibleRows.firstIndex(where: { $0.id == id }) {
            selectedIndex = index
        } else {
            selectedIndex = min(previousIndex, max(0, visibleRows.count - 1))
        }
    }

    /// Lowercased and without diacritics, so "ÉTÉ" finds "ete"; ASCII takes a fast path.
    static func folded(_ text: String) -> String {
        if text.utf8.allSatisfy({ $0 < 0x80 }) { return text.lowercased() }
        return text.folding(options: [.caseInsensitive, .diacriticInsensitive], locale: nil)
    }

    static func contains(_ haystack: [UInt8], _ needle: [UInt8]) -> Bool {
        guard let first = needle.first else { return true }
        guard haystack.count >= needle.count else { return false }
        let last = haystack.count - needle.count
        var index = 0
        while index <= last {
            if haystack[index] == first {
                var matched = 1
                while matched < needle.count, haystack[index + matched] == needle[matched] { matched += 1 }
                if matched == needle.count { return true }
            }
            index += 1
        }
        return false
    }
}
