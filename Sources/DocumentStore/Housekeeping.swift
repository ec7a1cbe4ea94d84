public import Logging

/// Where the store tells of failures in work nobody waits on: pruning revisions and compacting
/// the log after a save has answered, settling what a killed save left at start-up, tidying up
/// after a save that failed. Such work is done again by the document's next writer, so its
/// failure fails no request; but it is never silent: each is logged once, with what was being
/// done and the native cause, and counted (canvasd's `/metrics`).
public struct Housekeeping: Sendable {
    public enum Work: String, Sendable, CaseIterable {
        case prune, compaction, leftovers, cleanup
    }

    let logger: Logger
    let counted: @Sendable (Work) -> Void

    public init(logger: Logger = Logger(label: "canvas.documents"), counted: @escaping @Sendable (Work) -> Void = { _ in }) {
        self.logger = logger
        self.counted = counted
    }

    func failed(_ work: Work, _ doing: String, document: String, _ error: any Error) {
        logger.warning("\(doing) failed; the document's next writer does it again",
                       metadata: ["document": "\(document)", "work": "\(work.rawValue)", "error": "\(error)"])
        counted(work)
    }

    /// Runs `body`, telling of its failure rather than throwing it.
    func tidy(_ work: Work, _ doing: String, document: String, _ body: () throws -> Void) {
        do { try body() } catch { failed(work, doing, document: document, error) }
    }
}
