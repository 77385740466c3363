/// Object IDs in order, kept as runs of consecutive numbers of one entity and store: what a
/// did-save notification carries (``ManagedObjectContext/insertedObjectIDsKey`` and its
/// siblings). A save numbers its new rows consecutively, so the IDs of 50,000 new objects of
/// one entity are one run, where an array of them held 0.8 MB at the save's peak.
///
/// Safe to read on any queue: it holds no object.
public struct ObjectIDList: RandomAccessCollection, ExpressibleByArrayLiteral, Hashable, Sendable,
    CustomStringConvertible {
    private struct Run: Hashable, Sendable {
        let scope: ObjectIDScope
        let firstNumber: Int64
        /// The position in the list of the run's first ID.
        let start: Int
        var count: Int
    }

    private var runs: [Run] = []
    public private(set) var endIndex = 0
    public var startIndex: Int { 0 }

    public init() {}

    public init(_ ids: some Sequence<ObjectID>) {
        for id in ids { append(id) }
    }

    public init(arrayLiteral ids: ObjectID...) { self.init(ids) }

    public mutating func append(_ id: ObjectID) { append(scope: id.scope, number: id.number) }

    /// Appends the ID of `number` in `scope`, without making an ``ObjectID`` of it.
    mutating func append(scope: ObjectIDScope, number: Int64) {
        if let last = runs.last, last.scope === scope, last.firstNumber < Int64.max - Int64(last.count),
           number == last.firstNumber + Int64(last.count) {
            runs[runs.count - 1].count += 1
        } else {
            runs.append(Run(scope: scope, firstNumber: number, start: endIndex, count: 1))
        }
        endIndex += 1
    }

    public subscript(position: Int) -> ObjectID {
        precondition(position >= 0 && position < endIndex, "ObjectIDList index out of range")
        // The last run starting at or before `position`.
        var low = 0
        var high = runs.count - 1
        while low < high {
            let middle = (low + high + 1) / 2
            if runs[middle].start <= position { low = middle } else { high = middle - 1 }
        }
        let run = runs[low]
        return ObjectID(scope: run.scope, number: run.firstNumber + Int64(position - run.start))
    }

    public static func == (lhs: ObjectIDList, rhs: ObjectIDList) -> Bool { lhs.elementsEqual(rhs) }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(endIndex)
        for id in self { hasher.combine(id) }
    }

    public var description: String { Array(self).description }
}
