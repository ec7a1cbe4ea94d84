import CanvasProtocol
import DocumentStore
import Foundation
import Synchronization

/// Uploads under way, by upload id: what each announced and how far it is, its bytes in a
/// temporary file of its own. A part arrives on a worker, so the table sits behind a lock. Ids
/// are random and unguessable: whoever began an upload is the only one who can add to it or
/// commit it.
final class Uploads: Sendable {
    struct Upload {
        let name: String
        let size: Int
        let sha256: String
        let expectedRevision: Int?
        let spool: UploadSpool
        /// Who began it, for the per-owner limit: a key, a web token's owner, or the connection
        /// of a client with neither (`owner(client:envelope:)`; nil only where none is known).
        let owner: String?
        /// Bytes written to `spool` so far.
        var received = 0
        /// When a part last added bytes: only that keeps an upload alive, not `status` calls
        /// nor parts sent again.
        var touched: ContinuousClock.Instant
    }

    /// An upload no part has added bytes to in this long is dropped, so a vanished client frees its
    /// file, and one that only asks its status cannot hold its slot for ever.
    let idleLimit: Duration
    /// The time, for idle expiry: the clock's, or a test's.
    private let now: @Sendable () -> ContinuousClock.Instant

    private let table = Mutex<[String: Upload]>([:])

    init(idleLimit: Duration = .seconds(600), now: @escaping @Sendable () -> ContinuousClock.Instant = { .now }) {
        self.idleLimit = idleLimit
        self.now = now
    }

    /// Enters `upload` (its `touched` is set now) under a new id, unless its owner, or everyone
    /// together, has as many under way as allowed. An owner's first upload may take any free
    /// slot; its further ones leave the last free slot to an owner with none under way, so
    /// that no one owner (nor one person's two tokens) can fill every slot and keep others out.
    func begin(_ upload: Upload, maxUploads: Int, perOwner: Int) throws(ProtocolError) -> String {
        let now = self.now()
        var upload = upload
        upload.touched = now
        return try table.withLock { (table) throws(ProtocolError) -> String in
            table = table.filter { now - $0.value.touched < idleLimit }
            guard table.count < maxUploads else {
                throw ProtocolError(.unavailable, "\(table.count) uploads are under way; the limit is \(maxUploads)",
                                    data: ["reason": "busy", "limit": .integer(Int64(maxUploads))])
            }
            let owned = table.values.count { $0.owner == upload.owner }
            guard owned < perOwner else {
                throw ProtocolError(.unavailable, "\(Self.describe(upload.owner)) has \(owned) uploads under way; the limit is \(perOwner)",
                                    data: ["reason": "ownerUploads", "limit": .integer(Int64(perOwner))])
            }
            guard owned == 0 || table.count + 1 < maxUploads else {
                throw ProtocolError(.unavailable, "\(table.count) uploads are under way; the last of the \(maxUploads) slots is kept for an owner with none under way",
                                    data: ["reason": "busy", "limit": .integer(Int64(maxUploads))])
            }
            var id: String
            repeat { id = (0..<4).map { _ in String(UInt32.random(in: 0...UInt32.max), radix: 16) }.joined() } while table[id] != nil
            table[id] = upload
            return id
        }
    }

    /// Whom an upload counts against when its client has no key or token: its connection, so
    /// that two local clients are two owners here (a session counts against its connection
    /// too, `maxSessionsPerClient`). The routing frames name the connection; the web marker
    /// among them keeps a web peer's apart from a local one's.
    static func owner(client: String?, envelope: [[UInt8]]) -> String? {
        if let client { return client }
        guard !envelope.isEmpty else { return nil }
        return "connection:" + envelope.map { $0.map { String(format: "%02x", $0) }.joined() }.joined(separator: "/")
    }

    /// Who an owner is, for a refusal: never the key, token or routing id itself.
    static func describe(_ owner: String?) -> String {
        owner?.hasPrefix("connection:") == true ? "this connection (a client without a key or token)" : ServerMethods.describe(owner)
    }

    /// Runs `body` on upload `id`. `touching`: whether this may keep the upload alive, which
    /// it does only when `body` added bytes: a status call never does, nor does a part the
    /// server already has, or else resending one old part would hold a slot for ever. One past
    /// its idle time is gone, whether or not a `begin` has swept it out yet.
    func with<T>(_ id: String, touching: Bool, _ body: (inout Upload) throws(ProtocolError) -> T) throws(ProtocolError) -> T {
        let now = self.now()
        return try table.withLock { (table) throws(ProtocolError) -> T in
            guard var upload = table[id] else { throw Self.unknown(id) }
            guard now - upload.touched < idleLimit else {
                table[id] = nil
                throw Self.unknown(id)
            }
            let before = upload.received
            let result = try body(&upload)
            if touching && upload.received > before { upload.touched = now }
            table[id] = upload
            return result
        }
    }

    /// Takes the upload out of the table: to commit it (once) or to abort it.
    func take(_ id: String) throws(ProtocolError) -> Upload {
        guard let upload = table.withLock({ $0.removeValue(forKey: id) }) else { throw Self.unknown(id) }
        return upload
    }

    static func unknown(_ id: String) -> ProtocolError {
        ProtocolError(.notFound, "no upload \"\(id)\": never begun, committed, aborted or expired", data: ["upload": .string(id)])
    }
}

/// `document.get` and the chunked upload: documents in and out over the wire.
extension DocumentMethods {
    func transfer(_ method: Method, _ params: Params, attachments: [[UInt8]], owner: String?) throws(ProtocolError) -> [String: JSONValue] {
        switch method {
        case .documentGet: return try get(params)
        case .documentUploadBegin: return try begin(params, owner: owner)
        case .documentUploadPart: return try part(params, attachments)
        case .documentUploadStatus:
            let id = try params.string("upload")
            return try uploads.with(id, touching: false) { (upload) throws(ProtocolError) in Self.status(id, upload) }
        case .documentUploadAbort:
            let id = try params.string("upload")
            _ = try uploads.take(id)
            return ["upload": .string(id), "aborted": true]
        default:
            preconditionFailure("\(method.rawValue) is not a transfer")
        }
    }

    /// `name`, `revision`? (the current one when absent), `offset`? and `length`? (at most
    /// `maxGetBytes`): the bytes as base64, with the whole revision's size and sha256.
    private func get(_ params: Params) throws(ProtocolError) -> [String: JSONValue] {
        let name = try params.string("name")
        let revision = try params.optionalInteger("revision", in: 1...Int64(Int32.max)).map { Int($0) }
        let offset = try params.optionalInteger("offset", in: 0...Int64.max) ?? 0
        let length = Int(try params.optionalInteger("length", in: 0...Int64(limits.maxGetBytes)) ?? Int64(limits.maxGetBytes))
        let piece = try run { () throws(DocumentError) in try store.bytes(name, revision: revision, offset: offset, length: length) }
        return [
            "name": .string(piece.name), "revision": .integer(Int64(piece.revision)), "size": .integer(piece.size),
            "sha256": .string(piece.sha256), "offset": .integer(piece.offset), "length": .integer(Int64(piece.bytes.count)),
            "data": .string(Data(piece.bytes).base64EncodedString()),
        ]
    }

    private func begin(_ params: Params, owner: String?) throws(ProtocolError) -> [String: JSONValue] {
        let name = try params.string("name")
        do {
            try DocumentStore.checkName(name)
        } catch {
            throw Self.protocolError(error)
        }
        let size = Int(try params.integer("size", in: 1...Int64(Int32.max)))
        guard size <= limits.maxUploadBytes else {
            throw ProtocolError(.payloadTooLarge, "size: \(size) bytes is over the upload limit of \(limits.maxUploadBytes)",
                                data: ["field": "size", "size": .integer(Int64(size)), "limit": .integer(Int64(limits.maxUploadBytes))])
        }
        let sha256 = try params.string("sha256").lowercased()
        guard sha256.utf8.count == 64, sha256.utf8.allSatisfy({ (48...57).contains($0) || (97...102).contains($0) }) else {
            throw ProtocolError(.invalidParams, "sha256: 64 hexadecimal digits", data: ["field": "sha256"])
        }
        let expected = try params.optionalInteger("expectedRevision", in: 1...Int64(Int32.max)).map { Int($0) }
        // Asked now so a client does not send megabytes to learn it at the commit, which asks
        // again (the name may be taken, or the document saved, meanwhile).
        do {
            if let expected { try store.require(name, at: expected) } else { try store.requireFree(name) }
        } catch {
            throw Self.protocolError(error)
        }
        let spool: UploadSpool
        do { spool = try UploadSpool() } catch { throw Self.protocolError(error) }
        let upload = Uploads.Upload(name: name, size: size, sha256: sha256, expectedRevision: expected, spool: spool,
                                     owner: owner, touched: .now)
        let id = try uploads.begin(upload, maxUploads: limits.maxUploads, perOwner: limits.maxUploadsPerOwner)
        var result = Self.status(id, upload)
        result["partBytes"] = .integer(Int64(partBytes))
        return result
    }

    /// What one part may carry: the request limit less room for its JSON frame and overheads.
    private var partBytes: Int { max(1024, limits.maxMessageBytes - 16 * Limits.frameOverheadBytes - 4096) }

    /// Bytes at `offset`, in the binary frames after the JSON one. A part the server already
    /// has (a retry after a reconnect) is answered without being added again; a gap is refused
    /// with CONFLICT and `received`, from where the client carries on.
    private func part(_ params: Params, _ attachments: [[UInt8]]) throws(ProtocolError) -> [String: JSONValue] {
        let id = try params.string("upload")
        let offset = Int(try params.integer("offset", in: 0...Int64(Int32.max)))
        let count = attachments.reduce(0) { $0 + $1.count }
        guard count > 0 else {
            throw ProtocolError(.invalidParams, "a part carries its bytes in binary frames after the request", data: ["field": "offset"])
        }
        // Checked even where the request fits the message limit, so a client that ignores
        // `partBytes` learns it on the first part, not when a larger limit is configured away.
        guard count <= partBytes else {
            throw ProtocolError(.payloadTooLarge, "a part carries at most \(partBytes) bytes (partBytes); this one carries \(count)",
                                data: ["field": "part", "size": .integer(Int64(count)), "limit": .integer(Int64(partBytes))])
        }
        return try uploads.with(id, touching: true) { (upload) throws(ProtocolError) in
            let received = upload.received
            if offset + count <= received { return Self.status(id, upload) }   // a retry: already here
            guard offset == received else {
                throw ProtocolError(.conflict, "the upload has \(received) bytes; a part at \(offset) leaves a gap",
                                    data: ["upload": .string(id), "received": .integer(Int64(received)), "size": .integer(Int64(upload.size))])
            }
            guard received + count <= upload.size else {
                throw ProtocolError(.payloadTooLarge, "the part goes past the announced size of \(upload.size) bytes",
                                    data: ["field": "size", "size": .integer(Int64(received + count)), "limit": .integer(Int64(upload.size))])
            }
            do throws(DocumentError) { try upload.spool.write(attachments, at: received) } catch { throw Self.protocolError(error) }
            upload.received += count
            return Self.status(id, upload)
        }
    }

    /// The commit: the upload leaves the table at once (it is committed once, or refused), and
    /// its check and save run where saves run. Refused, nothing is stored.
    func prepareCommit(_ params: Params) throws(ProtocolError) -> Write {
        let id = try params.string("upload")
        let upload = try uploads.with(id, touching: false) { (upload) throws(ProtocolError) in upload }
        guard upload.received == upload.size else {
            throw ProtocolError(.invalidState, "the upload has \(upload.received) of its \(upload.size) bytes",
                                data: ["reason": "incomplete", "upload": .string(id), "received": .integer(Int64(upload.received)),
                                       "size": .integer(Int64(upload.size))])
        }
        _ = try uploads.take(id)
        return Write(document: upload.name, save: { [store] () throws(DocumentError) in
            defer { upload.spool.discard() }
            let hash = try upload.spool.sha256()
            guard hash == upload.sha256 else {
                throw .refused(name: upload.name, reason: "sha256Mismatch", message: "the bytes hash to \(hash), not the \(upload.sha256) announced")
            }
            _ = try store.check(upload: upload.spool, as: upload.name)
            return try store.store(upload: upload.spool, as: upload.name, expectedRevision: upload.expectedRevision)
        }, saves: true)
    }

    private static func status(_ id: String, _ upload: Uploads.Upload) -> [String: JSONValue] {
        ["upload": .string(id), "name": .string(upload.name), "received": .integer(Int64(upload.received)),
         "size": .integer(Int64(upload.size))]
    }
}
