import CanvasProtocol
import DocumentStore
import Foundation

/// Document methods' jobs: a document method sent without a session runs off the loop and is
/// answered when its job is done (with a session it goes through the session's request, which
/// starts the same job); saves are announced on the server-wide `documents.` topic, numbered
/// here or, with a shared store, on its document feed for every instance.
extension Dispatcher {
    /// The key a write sent without a session leaves with the revision it makes, so that the
    /// same request sent again (its reply lost, to this instance or another) answers that
    /// revision instead of saving twice or answering `CONFLICT`: it stands for the client (its
    /// key or token, where it has one), the request's id and the request itself, so an id used
    /// again on another request does not find it.
    static func madeBy(_ request: Request, client: String?) -> String {
        let bytes = Array("document".utf8) + [0] + Array((client ?? "").utf8) + [0] + JSONCodec.serialize(request.id.json) + [0]
            + ReplyCache.fingerprint(request)
        return String(DocumentStore.sha256(bytes).prefix(32))
    }

    /// Starts a document method's job: a read on the read runner, a write where saves run.
    /// `session`: the session the request named, which waits for the job in its slot.
    func startDocumentJob(_ method: Method, _ params: Params, _ request: inout InFlightRequest, now: ContinuousClock.Instant,
                          session: String?, madeBy sessionKey: String? = nil, fence: DocumentStore.WriteFence? = nil) throws(ProtocolError) {
        let documents = try DocumentMethods.available(documents)
        func job() -> PendingJob {
            PendingJob(owner: session.map { .session($0) } ?? .request(request), client: request.client)
        }
        if method.scope == .documentWrite {
            let madeBy = session == nil ? Self.madeBy(request.request, client: request.client) : sessionKey
            let write = try documents.prepareSave(method, params, madeBy: madeBy, fence: fence)
            request.written = (write.saves, write.unchangedAt)
            jobs.save(write.document, write.save, for: job())
        } else {
            var read = job()
            if method == .documentGet {
                // The file's piece, its base64 text and the reply holding that text.
                let asked = (try? params.optionalInteger("length", in: 0...Int64.max)) ?? nil
                let length = min(asked.map { Int(clamping: $0) } ?? limits.maxGetBytes, limits.maxGetBytes)
                read.reservedBytes = try memory.admitLargeReply("document.get", bytes: length * 3, now: now)
            }
            let attachments = request.request.attachments
            do throws(ProtocolError) {
                // The reply is written where the read ran: a document.get's is megabytes of
                // base64 to escape, which on the loop would hold up every other client.
                let id = request.id, owner = Uploads.owner(client: request.client, envelope: request.envelope)
                try jobs.read(for: read) {
                    do throws(ProtocolError) {
                        return .reply(ReplyEncoder.success(id: id, result: try documents.read(method, params, attachments: attachments, owner: owner)))
                    } catch {
                        return .reply(ReplyEncoder.failure(id: id, error: error))
                    }
                }
            } catch {
                memory.release(read.reservedBytes)
                throw error
            }
        }
    }

    /// The reply to a document method, and the `document.saved` of a write that made a revision.
    func documentReply(_ request: InFlightRequest, _ outcome: JobOutcome, _ call: inout Call) -> [UInt8] {
        switch outcome {
        case .saved(let outcome, _):
            do throws(ProtocolError) {
                let summary = try DocumentMethods.available(documents).run { () throws(DocumentError) in try outcome.get() }
                let result = DocumentMethods.json(summary)
                if let written = request.written, written.publishes, summary.revision != written.unchangedAt, !summary.madeBefore {
                    // A write naming a session is that session's save, as a submit is (5.1).
                    let saver = request.client == nil ? request.request.session : nil
                    call.saves.append((result, summary.savedAt, request.request.method, saver))
                    announceSaves(&call)
                }
                return ReplyEncoder.success(id: request.id, result: result)
            } catch {
                return ReplyEncoder.failure(id: request.id, error: error)
            }
        case .reply(let bytes):
            return bytes
        case .page, .pageInk, .image, .stored:
            return ReplyEncoder.failure(id: request.id, error: ProtocolError(.internal, "a document method's job came back as another's"))
        }
    }

    /// A save heard on the document feed (every instance's, numbered there): the event to
    /// publish on the `documents.` topic, or none for data that is not a JSON object.
    public func relay(seq: UInt64, data: [UInt8]) -> Output {
        var output = Output()
        guard seq <= 1 << 53, case .object(let fields)? = try? JSONCodec.parse(data) else {
            logger.error("document feed message unreadable; not relayed", metadata: ["seq": "\(seq)"])
            return output
        }
        output.events.append(ReplyEncoder.event(session: "documents", name: "document.saved", seq: seq, data: fields))
        return output
    }

    /// `document.saved` on the server-wide `documents.` topic, which has its own sequence, for
    /// each save the call made.
    func announceSaves(_ call: inout Call) {
        if !call.saves.isEmpty { metrics?.saved(call.saves.count) }
        for save in call.saves {
            var data = WireShapes.saved(save.summary, cause: save.cause)
            if let session = save.session, !authenticated { data["session"] = .string(session) }
            if let lane = persistence.lanes.first, let shared = persistence.store, shared.feed != nil {
                // Numbered and published once for every instance; each relays it (`relay`). Told
                // on the first store lane's thread, like everything said to the store.
                if case .string(let name)? = data["name"], case .integer(let revision)? = data["revision"],
                   case .string(let sha256)? = data["sha256"] {
                    let bytes = JSONCodec.serialize(.object(data))
                    let savedAt = save.savedAt
                    lane { _ = shared.announce(name: name, revision: Int(revision), sha256: sha256, savedAt: savedAt, data: bytes) }
                }
                continue
            }
            documentSeq += 1
            call.output.events.append(ReplyEncoder.event(session: "documents", name: "document.saved", seq: documentSeq, data: data))
        }
        call.saves.removeAll()
    }
}
