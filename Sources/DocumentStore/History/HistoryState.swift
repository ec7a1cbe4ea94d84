/// A history as its log leaves it: what each reader and writer works from.
struct HistoryState: Sendable {
    /// The kept revisions: committed, not pruned, not abandoned.
    var revisions: [Int: KeptRevision] = [:]
    /// The lowest number never handed out.
    var next = 1
    /// The revision the document file was last seen to be, and as which file.
    var current: (revision: Int, document: FileSnapshot)?
    /// An append whose commit has not followed (under way, or killed).
    var intent: AppendIntent?
    /// A save about to write a line's file past what the log accounts for (extending it, or
    /// making a new one), whose commit has not followed.
    var extending: LineExtension?
    /// The most bytes any record has accounted for in each line's file (kept, pruned, or as a
    /// seal left it): a file longer than this, with no save under way on it, holds bytes of
    /// records the log lost.
    var written: [Int: Int64] = [:]
    /// A replacing save committed whose rename is not known to have happened.
    var pending: KeptRevision?
    /// Each line's file as the last writer left it.
    var lines: [Int: FileSnapshot] = [:]
    /// Records read: a log long past what it keeps is written again, smaller.
    var records = 0
    static let compactionRecords = 512

    mutating func apply(_ record: HistoryRecord) {
        records += 1
        switch record {
        case .revision(let kept):
            revisions[kept.revision] = kept
            next = max(next, kept.revision + 1)
            intent = nil
            extending = nil
            lines[kept.line] = kept.lineFile ?? lines[kept.line]
            written[kept.line] = max(written[kept.line] ?? 0, kept.length, kept.lineFile?.size ?? 0)
            if kept.temporary != nil {
                pending = kept
            } else {
                pending = nil
                if let document = kept.document { current = (kept.revision, document) }
            }
        case .intent(let appending):
            intent = appending
        case .extending(let extension_):
            extending = extension_
        case .identity(let number, let document):
            current = (number, document)
            if pending?.revision == number { pending = nil }
            intent = nil
        case .abandoned(let number):
            revisions[number] = nil
            if pending?.revision == number { pending = nil }
            if intent?.revision == number { intent = nil }
            if extending?.revision == number { extending = nil }
        case .pruned(let numbers):
            for number in numbers { revisions[number] = nil }
        case .seal(let line, let file):
            lines[line] = file
            written[line] = max(written[line] ?? 0, file?.size ?? 0)
        case .base(let first):
            next = max(next, first)
        }
    }

    /// Kept revisions, oldest first.
    var kept: [KeptRevision] { revisions.keys.sorted().compactMap { revisions[$0] } }

    /// The newest kept revision.
    var newest: KeptRevision? { revisions.keys.max().flatMap { revisions[$0] } }

    /// The revision a document file is, when the history last saw it as exactly this file.
    func revision(of document: FileSnapshot) -> KeptRevision? {
        guard let current, current.document == document else { return nil }
        return revisions[current.revision]
    }

    /// The line files kept revisions need, with the length each must have at least.
    var neededLines: [Int: Int64] {
        var needed: [Int: Int64] = [:]
        for kept in revisions.values { needed[kept.line] = max(needed[kept.line] ?? 0, kept.length) }
        return needed
    }
}
