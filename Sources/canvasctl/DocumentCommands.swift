public import ArgumentParser
import CanvasCore
import CanvasProtocol
import DocumentStore
import Foundation

struct Documents: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "List the server's documents with their revisions and page counts.")
    @OptionGroup var connection: Connection
    func run() throws { try connection.call("document.list") }
}

struct DocumentInfo: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "document-info", abstract: "A document's pages, as display sizes and rotations.")
    @OptionGroup var connection: Connection
    @Argument(help: "The document's name in the server's folder.") var name: String
    func run() throws { try connection.call("document.info", ["name": .string(name)]) }
}

struct Revisions: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "A document's kept revisions, oldest first.")
    @OptionGroup var connection: Connection
    @Argument(help: "The document's name in the server's folder.") var name: String
    func run() throws { try connection.call("document.revisions", ["name": .string(name)]) }
}

struct Restore: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Make an earlier revision current again (as a new revision).")
    @OptionGroup var connection: Connection
    @Argument(help: "The document's name in the server's folder.") var name: String
    @Option(help: "The revision to bring back.") var revision: Int
    @Option(help: "Refuse (CONFLICT) unless the document is still at this revision.") var expectedRevision: Int?

    func run() throws {
        var params: [String: JSONValue] = ["name": .string(name), "revision": .integer(Int64(revision))]
        if let expectedRevision { params["expectedRevision"] = .integer(Int64(expectedRevision)) }
        try connection.call("document.restore", params)
    }
}

/// Flattening without a server: a file in, a file out, the same code canvasd runs.
struct Flatten: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Flatten a drawing into one page of a PDF or .yianazip file, offline.",
        discussion: "The drawing is JSON as drawing.get returns it: {\"strokes\": [...], \"texts\": [...]}, in display points of the page."
    )
    @Option(help: "The document to read (.pdf or .yianazip).") var document: String
    // Unconditional, so `--page -1` is refused as a page, not as an unknown option.
    @Option(parsing: .unconditional, help: "The page, numbered from 0.") var page: Int
    @Option(help: "The drawing, a JSON file.") var drawing: String
    @Option(help: "Where to write the result (a new file; the input is not changed).") var out: String
    @Option(help: "paper (into the page's content) or annotations (standard /Ink and /FreeText annotations other PDF tools can edit).")
    var inkForm: InkForm = .paper

    func validate() throws {
        guard page >= 0 else { throw ValidationError("--page counts from 0; \(page) is no page") }
        let ext = (document as NSString).pathExtension.lowercased()
        guard DocumentStore.extensions.contains(ext) else { throw ValidationError("--document must be a .pdf or .yianazip file") }
        guard (out as NSString).pathExtension.lowercased() == ext else { throw ValidationError("--out must have the same extension as --document") }
        guard !FileManager.default.fileExists(atPath: out) else { throw ValidationError("\(out) exists; choose a new name") }
    }

    func run() throws {
        try requireReadable(document, "--document")
        try requireReadable(drawing, "--drawing")
        try requireWritableFolder(of: out, "--out")
        let strokes: Drawing
        do {
            strokes = try JSONDecoder().decode(Drawing.self, from: Data(contentsOf: URL(fileURLWithPath: drawing)))
        } catch let error as DecodingError {
            throw CommandFailure("--drawing \(drawing): not a drawing as drawing.get returns it: \(Self.describe(error))")
        }
        // A private folder holds a copy, so the store's own checks, revisions and atomic save
        // do the work and the input file is never touched.
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("canvasctl-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: scratch) }
        // The copy has the input's name, so what the store says of it ("x.pdf has 3 pages")
        // names the file the user gave (a name the store would not take gets a plain one).
        let input = (document as NSString).lastPathComponent
        let name = input.hasPrefix(".") ? "document." + (document as NSString).pathExtension : input
        // Refused before the copy, which would write out a sparse file's every byte.
        let size = ((try? FileManager.default.attributesOfItem(atPath: document))?[.size] as? NSNumber)?.int64Value ?? 0
        guard size <= DocumentStore.defaultMaxDocumentBytes else {
            FileHandle.standardError.write(Data("canvasctl flatten: --document \(document) is \(size) bytes; documents over \(DocumentStore.defaultMaxDocumentBytes) bytes are not read\n".utf8))
            throw ExitCode(2)
        }
        do {
            try FileManager.default.copyItem(at: URL(fileURLWithPath: document), to: scratch.appendingPathComponent(name))
        } catch {
            throw CommandFailure("cannot copy --document \(document): \(error.localizedDescription)")
        }
        let summary: DocumentSummary
        do throws(DocumentError) {
            let store = try DocumentStore(folder: scratch)
            summary = try store.flatten(name, page: page, drawing: strokes, form: inkForm)
        } catch {
            FileHandle.standardError.write(Data("canvasctl flatten: \(error)\n".utf8))
            throw ExitCode(2)
        }
        do {
            try FileManager.default.moveItem(at: scratch.appendingPathComponent(name), to: URL(fileURLWithPath: out))
        } catch {
            throw CommandFailure("cannot write --out \(out): \(error.localizedDescription)")
        }
        print("{\"out\":\(String(decoding: JSONCodec.serialize(.string(out)), as: UTF8.self)),\"pageCount\":\(summary.pageCount)}")
    }

    /// Where in the drawing JSON the decoder stopped, and why, without Foundation's dump.
    private static func describe(_ error: DecodingError) -> String {
        let (context, why): (DecodingError.Context, String) = switch error {
        case .typeMismatch(let type, let c): (c, "not a \(type)")
        case .valueNotFound(_, let c): (c, "missing")
        case .keyNotFound(let key, let c): (c, "\(key.stringValue) missing")
        case .dataCorrupted(let c): (c, c.debugDescription)
        @unknown default: (DecodingError.Context(codingPath: [], debugDescription: ""), "unreadable")
        }
        let path = context.codingPath.map { $0.intValue.map { "[\($0)]" } ?? ".\($0.stringValue)" }.joined()
        return "\(path.isEmpty ? "the file" : String(path.drop { $0 == "." })): \(why)"
    }
}

/// `--ink-form paper|annotations`: the store's own choice, read as its raw value.
extension InkForm: ExpressibleByArgument {}
