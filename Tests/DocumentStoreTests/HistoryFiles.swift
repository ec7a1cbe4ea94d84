@testable import DocumentStore
import CanvasCore
import Foundation
import Testing

/// What tests read of a document's history folder, `.canvas-revisions/<name>/`, as a reader of
/// the folder would: its files, and its log parsed without the store.

func historyFolder(_ folder: URL, _ name: String) -> URL {
    folder.appendingPathComponent(".canvas-revisions").appendingPathComponent(name)
}

/// Every name in the document's history folder, sorted.
func historyNames(_ folder: URL, _ name: String) throws -> [String] {
    try FileManager.default.contentsOfDirectory(atPath: historyFolder(folder, name).path).sorted()
}

/// The history's line files (`data.<L>`), sorted.
func lineFiles(_ folder: URL, _ name: String) throws -> [String] {
    try historyNames(folder, name).filter { RevisionHistory.line(ofFile: $0) != nil }
}

/// The size of one file of the history.
func historyFileSize(_ folder: URL, _ name: String, _ file: String) throws -> Int64 {
    let attributes = try FileManager.default.attributesOfItem(atPath: historyFolder(folder, name).appendingPathComponent(file).path)
    return (attributes[.size] as? NSNumber)?.int64Value ?? -1
}

/// The records of the document's `history.log`, up to its last good one.
func historyRecords(_ folder: URL, _ name: String) throws -> [HistoryRecord] {
    let bytes = Array(try Data(contentsOf: historyFolder(folder, name).appendingPathComponent(HistoryLog.fileName)))
    return try HistoryLog.parse(bytes).get().records
}

/// The state the document's `history.log` leaves.
func historyState(_ folder: URL, _ name: String) throws -> HistoryState {
    var state = HistoryState()
    for record in try historyRecords(folder, name) { state.apply(record) }
    return state
}

/// The document's history's one writer, as a save of the store takes it (its lock held until
/// `close()`: close it before the store reads or writes the document again).
func historyWriter(_ store: DocumentStore, _ name: String) throws -> HistoryWriter {
    guard let history = try store.history(name, create: false), let writer = try store.writer(name, history, wait: true) else {
        throw DocumentError.io(operation: "open the history of \(name)", message: "no history")
    }
    return writer
}

/// The file at `url` as the history records files.
func fileSnapshot(_ url: URL) throws -> FileSnapshot {
    let directory = try Directory.open(url.deletingLastPathComponent().path)
    guard let stat = try directory.stat(url.lastPathComponent) else { throw CocoaError(.fileNoSuchFile) }
    return FileSnapshot(stat)
}

/// SHA-256 of `bytes` and its state after the last whole block, as a revision's record holds them.
func hashAndState(_ bytes: [UInt8]) -> (String, SHA256Midstate) {
    var hasher = SHA256Hasher()
    hasher.update(bytes)
    let state = hasher.midstate
    return (hasher.finish(), state)
}

/// Whether any file of the document's history is the document's own inode.
func historySharesTheDocument(_ folder: URL, _ name: String) throws -> Bool {
    let document = try fileSnapshot(folder.appendingPathComponent(name))
    return try historyNames(folder, name).contains { file in
        guard let other = try? fileSnapshot(historyFolder(folder, name).appendingPathComponent(file)) else { return false }
        return (other.device, other.inode) == (document.device, document.inode)
    }
}

/// What a replacing save of `bytes` killed just after its commit record leaves: its new file in
/// the history's folder under `temporary`, its bytes in a line of their own (`data.<N>`), and the
/// durable commit record naming the temporary file, for the next revision number N, which it
/// returns. The document itself is as it was (the rename never happened).
func commitWithoutRename(_ store: DocumentStore, _ folder: URL, _ name: String, bytes: [UInt8], madeBy: String? = nil,
                         pageCount: Int? = nil, temporary: String = ".tmp.99999.1") throws -> Int {
    let writer = try historyWriter(store, name)
    defer { writer.close() }
    let number = writer.state.next
    let temporaryURL = historyFolder(folder, name).appendingPathComponent(temporary)
    let lineURL = historyFolder(folder, name).appendingPathComponent(RevisionHistory.lineName(number))
    try Data(bytes).write(to: temporaryURL)
    try Data(bytes).write(to: lineURL)
    let (sha256, state) = hashAndState(bytes)
    try writer.append([.revision(number, line: number, length: Int64(bytes.count), sha256: sha256, state: state, saved: DocumentStore.now(),
                                 source: "save", document: try fileSnapshot(temporaryURL), lineFile: try fileSnapshot(lineURL),
                                 temporary: temporary, madeBy: madeBy, pageCount: pageCount)], durable: true)
    return number
}

/// The document's bytes with one more incremental update: what the next save of `drawing` on
/// its first page makes of a `.pdf`.
func withUpdate(_ url: URL, _ drawing: Drawing) throws -> [UInt8] {
    Array(try Data(contentsOf: url)) + (try Flattener.increment(PDFLocation(path: url.path), page: 0, adding: drawing))
}
