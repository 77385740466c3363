/// The changes that turn one set of fetched sections into another, in a table view's batch
/// terms: deletions and move sources at old positions, insertions and move destinations at
/// new ones. Moves are as few as possible: the objects (and sections) that keep their
/// relative order stay.
struct FetchedResultsDiff {
    struct ObjectChange {
        var object: ManagedObject
        var type: FetchedResultsChangeType
        var old: FetchedIndexPath?
        var new: FetchedIndexPath?
    }

    private(set) var deletedSections: [(Int, FetchedResultsSection)] = []
    private(set) var insertedSections: [(Int, FetchedResultsSection)] = []
    private(set) var objects: [ObjectChange] = []

    var isEmpty: Bool { deletedSections.isEmpty && insertedSections.isEmpty && objects.isEmpty }

    /// - parameter updated: objects whose values changed; those that stay put are reported as updates.
    init(old: [FetchedResultsSection], new: [FetchedResultsSection], oldPaths: [ObjectIdentifier: FetchedIndexPath],
         updated: Set<ObjectIdentifier>) {
        let oldSectionIndex = Dictionary(old.enumerated().map { ($1.name, $0) },
                                         uniquingKeysWith: { first, _ in first })
        // Sections present before and after whose relative order holds stay; the others go and come.
        let common = new.enumerated().compactMap { newIndex, section in
            oldSectionIndex[section.name].map { (newIndex, $0) }
        }
        let keptSections = Set(Self.longestIncreasingRun(common.map(\.1)).map { common[$0].0 })
        var keptOldSections: Set<Int> = []
        for newIndex in keptSections {
            if let oldIndex = oldSectionIndex[new[newIndex].name] { keptOldSections.insert(oldIndex) }
        }
        for (index, section) in old.enumerated() where !keptOldSections.contains(index) {
            deletedSections.append((index, section))
        }
        for (index, section) in new.enumerated() where !keptSections.contains(index) {
            insertedSections.append((index, section))
        }

        var present: Set<ObjectIdentifier> = []
        var inserts: [ObjectChange] = []
        var moves: [ObjectChange] = []
        var updates: [ObjectChange] = []
        for (sectionIndex, section) in new.enumerated() {
            // Objects that were in this same (kept) section may stay, if their order holds.
            var candidates: [(item: Int, oldPath: FetchedIndexPath)] = []
            for (item, object) in section.objects.enumerated() {
                let id = ObjectIdentifier(object)
                present.insert(id)
                let newPath = FetchedIndexPath(item: item, section: sectionIndex)
                guard let oldPath = oldPaths[id] else {
                    inserts.append(ObjectChange(object: object, type: .insert, old: nil, new: newPath))
                    continue
                }
                if keptSections.contains(sectionIndex), old[oldPath.section].name == section.name {
                    candidates.append((item, oldPath))
                } else {
                    moves.append(ObjectChange(object: object, type: .move, old: oldPath, new: newPath))
                }
            }
            let staying = Set(Self.longestIncreasingRun(candidates.map(\.oldPath.item)))
            for (position, candidate) in candidates.enumerated() {
                let object = section.objects[candidate.item]
                let newPath = FetchedIndexPath(item: candidate.item, section: sectionIndex)
                if !staying.contains(position) {
                    moves.append(ObjectChange(object: object, type: .move, old: candidate.oldPath, new: newPath))
                } else if updated.contains(ObjectIdentifier(object)) {
                    updates.append(ObjectChange(object: object, type: .update, old: candidate.oldPath, new: newPath))
                }
            }
        }
        var deletes: [ObjectChange] = []
        for (sectionIndex, section) in old.enumerated() {
            for (item, object) in section.objects.enumerated() where !present.contains(ObjectIdentifier(object)) {
                let path = FetchedIndexPath(item: item, section: sectionIndex)
                deletes.append(ObjectChange(object: object, type: .delete, old: path, new: nil))
            }
        }
        objects = deletes + inserts + moves + updates
    }

    /// The positions (into `values`) of a longest strictly increasing subsequence.
    static func longestIncreasingRun(_ values: [Int]) -> [Int] {
        var tails: [Int] = []          // positions of the smallest tail of each run length
        var previous = Array(repeating: -1, count: values.count)
        for (position, value) in values.enumerated() {
            var low = 0, high = tails.count
            while low < high {
                let middle = (low + high) / 2
                if values[tails[middle]] < value { low = middle + 1 } else { high = middle }
            }
            if low > 0 { previous[position] = tails[low - 1] }
            if low == tails.count { tails.append(position) } else { tails[low] = position }
        }
        var run: [Int] = []
        var position = tails.last ?? -1
        while position >= 0 {
            run.append(position)
            position = previous[position]
        }
        return run.reversed()
    }
}
