import ArgumentParser
import CanvasProtocol
import DocumentStore
import Foundation

/// `canvasctl get`: a document's bytes from the server, in pieces, checked against its sha256.
struct GetDocument: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "get",
                                                    abstract: "Fetch a document (the current revision, or --revision N; 1 is the original).")
    @OptionGroup var connection: Connection
    @Argument(help: "The document's name in the server's folder.") var name: String
    @Option(help: "The revision to fetch (default: the current one).") var revision: Int?
    @Option(help: "Where to write it (a new file).") var out: String

    func validate() throws {
        guard !FileManager.default.fileExists(atPath: out) else { throw ValidationError("\(out) exists; choose a new name") }
    }

    func run() throws {
        try requireWritableFolder(of: out, "--out")
        let client = try connection.client()
        var bytes: [UInt8] = []
        var first: [String: JSONValue]?
        repeat {
            var params: [String: JSONValue] = ["name": .string(name), "offset": .integer(Int64(bytes.count))]
            if let pinned = revision.map(Int64.init) ?? first?["revision"]?.integerValue { params["revision"] = .integer(pinned) }
            let piece = try resultOrFail(client.call("document.get", params))
            first = first ?? piece
            guard let data = piece["data"]?.stringValue.flatMap({ Data(base64Encoded: $0) }), !data.isEmpty || piece["size"] == .integer(0) else {
                throw ValidationError("the server sent a piece without data")
            }
            bytes += data
        } while Int64(bytes.count) < (first?["size"]?.integerValue ?? 0)
        let hash = DocumentStore.sha256(bytes)
        guard hash == first?["sha256"]?.stringValue else {
            throw ValidationError("the bytes hash to \(hash), not the \(first?["sha256"]?.stringValue ?? "-") the server named; nothing written")
        }
        try Data(bytes).write(to: URL(fileURLWithPath: out), options: .withoutOverwriting)
        printJSON(["name": .string(name), "revision": first?["revision"] ?? .null, "size": .integer(Int64(bytes.count)),
                   "sha256": .string(hash), "out": .string(out)])
    }
}

/// `canvasctl upload`: a file as a new document, or as the next revision of one.
struct Upload: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Upload a .pdf or .yianazip file as a new document, or with --expected-revision as the next revision of one.")
    @OptionGroup var connection: Connection
    @Argument(help: "The file to upload.") var file: String
    @Option(help: "The document's name on the server (default: the file's name).") var name: String?
    @Option(help: "Upload as the next revision of an existing document still at this revision.") var expectedRevision: Int?

    func run() throws {
        try requireReadable(file, "file")
        let bytes: [UInt8]
        do {
            bytes = Array(try Data(contentsOf: URL(fileURLWithPath: file)))
        } catch {
            throw CommandFailure("file \(file): cannot read it: \(error.localizedDescription)")
        }
        let client = try connection.client()
        let target = name ?? (file as NSString).lastPathComponent
        var params: [String: JSONValue] = ["name": .string(target), "size": .integer(Int64(bytes.count)),
                                           "sha256": .string(DocumentStore.sha256(bytes))]
        if let expectedRevision { params["expectedRevision"] = .integer(Int64(expectedRevision)) }
        func call(_ method: String, _ params: [String: JSONValue], frames: [[UInt8]] = []) throws -> [String: JSONValue] {
            try resultOrFail(client.call(method, params, frames: frames))
        }
        let begun = try call("document.upload.begin", params)
        guard let upload = begun["upload"]?.stringValue, let partBytes = begun["partBytes"]?.integerValue.map(Int.init) else {
            throw ValidationError("the server's reply to document.upload.begin has no upload id")
        }
        var offset = 0
        while offset < bytes.count {
            let end = min(offset + partBytes, bytes.count)
            let part = try call("document.upload.part", ["upload": .string(upload), "offset": .integer(Int64(offset))],
                                frames: [Array(bytes[offset..<end])])
            offset = Int(part["received"]?.integerValue ?? Int64(end))
        }
        printJSON(try call("document.upload.commit", ["upload": .string(upload)]))
    }
}
