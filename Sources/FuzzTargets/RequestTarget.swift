import CanvasProtocol
import CanvasService
import Foundation
import Logging
import TestSupport

/// The request decoder and the dispatcher behind it, fed a sequence of requests.
///
/// An input is requests separated by newlines; within one, the byte 0x1F separates frames (the
/// first is the JSON frame). `$session` in a request stands for the session most recently
/// opened, so inputs reach the states behind `session.open` although ids are random. Each input
/// gets a fresh dispatcher over a fresh document folder holding `doc.pdf` and `doc.yianazip`.
///
/// Besides crashes, it traps when the dispatcher breaks the wire contract: not exactly one
/// reply per request, a reply that is not
/// one JSON object with the request's id and exactly one of `result` and `error`, an unknown
/// error code, or an event whose frames or sequence numbers are wrong.
public enum RequestTarget {
    public static func run(_ input: [UInt8]) {
        let folder = FuzzFolder.shared
        folder.reset()
        var configuration = ServiceConfiguration()
        configuration.documentsPath = folder.path
        configuration.keepRevisions = 2
        configuration.limits.maxMessageBytes = 64 << 10
        let dispatcher = Dispatcher(configuration: configuration, logger: Logger(label: "fuzz", factory: { _ in SwiftLogNoOpLogHandler() }))
        var clock = ContinuousClock.now
        var session = "none"
        var lastSeq: [String: Int64] = [:]
        for line in input.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: true).prefix(64) {
            let frames = line.split(separator: 0x1F, omittingEmptySubsequences: false).map { replacing(Array($0), session) }
            clock = clock.advanced(by: .milliseconds(7))
            let output = dispatcher.handle(frames, at: clock)
            // Saves run in place here, so every request is answered at once, exactly once.
            guard output.replies.count == 1 else { fatalError("\(output.replies.count) replies to one request") }
            let reply = check(reply: output.replies[0].bytes, for: frames.first ?? [])
            if case .string(let opened)? = reply["result"]?["session"] { session = opened }
            for event in output.events { check(event: event, &lastSeq) }
            for event in dispatcher.fireTimers(at: clock) { check(event: event, &lastSeq) }
        }
        for event in dispatcher.expireIdle(at: clock.advanced(by: .seconds(3600))) { check(event: event, &lastSeq) }
        if dispatcher.sessionCount != 0 { fatalError("sessions left after every one expired") }
    }

    private static let placeholder = Array("$session".utf8)

    private static func replacing(_ frame: [UInt8], _ session: String) -> [UInt8] {
        guard frame.count >= placeholder.count else { return frame }
        var out: [UInt8] = []
        out.reserveCapacity(frame.count)
        var index = 0
        while index < frame.count {
            if frame[index] == UInt8(ascii: "$"), frame[index...].starts(with: placeholder) {
                out += Array(session.utf8)
                index += placeholder.count
            } else {
                out.append(frame[index])
                index += 1
            }
        }
        return out
    }

    /// The reply's object; traps when it breaks the contract.
    private static func check(reply: [UInt8], for request: [UInt8]) -> [String: JSONValue] {
        guard case .object(let object)? = try? JSONCodec.parse(reply) else {
            fatalError("the reply is not a JSON object: \(String(decoding: reply, as: UTF8.self))")
        }
        guard (object["result"] == nil) != (object["error"] == nil), object.keys.count == 2, object.keys.contains("id") else {
            fatalError("the reply needs an id and exactly one of result and error: \(object)")
        }
        if let error = object["error"] {
            guard case .string(let code)? = error["code"], ErrorCode(rawValue: code) != nil, case .string? = error["message"] else {
                fatalError("an error without a known code and a message: \(error)")
            }
        }
        // A request whose id could be read gets it back; an unreadable one gets null.
        if case .object(let sent)? = try? JSONCodec.parse(request), let id = sent["id"] {
            switch id {
            case .string, .integer:
                // null is for a request too malformed to trust its id (or too large to read).
                if object["id"] != id && object["id"] != .null {
                    fatalError("reply id \(String(describing: object["id"])) for request id \(id)")
                }
            default: break
            }
        }
        return object
    }

    private static func check(event: [[UInt8]], _ lastSeq: inout [String: Int64]) {
        guard event.count == 2, case .object(let body)? = try? JSONCodec.parse(event[1]),
              case .string(let session)? = body["session"], case .string(let name)? = body["event"],
              case .integer(let seq)? = body["seq"], case .object? = body["data"]
        else { fatalError("a malformed event: \(event.map { String(decoding: $0, as: UTF8.self) })") }
        guard String(decoding: event[0], as: UTF8.self) == "\(session).\(name)" else { fatalError("topic and body disagree") }
        guard seq == lastSeq[session, default: 0] + 1 else { fatalError("\(session): seq \(seq) after \(lastSeq[session, default: 0])") }
        lastSeq[session] = seq
    }
}

/// A document folder for the fuzz targets, with a one-page PDF and a `.yianazip` of it; one per
/// process, put back as it was before every input.
struct FuzzFolder: Sendable {
    let path: String

    static let shared = FuzzFolder()

    init() {
        path = NSTemporaryDirectory() + "canvas-fuzz-\(getpid())-\(UInt64.random(in: 0...UInt64.max))"
        reset()
    }

    /// Everything gone but the two documents, written afresh.
    func reset() {
        let manager = FileManager.default
        if let entries = try? manager.contentsOfDirectory(atPath: path) {
            for entry in entries { try? manager.removeItem(atPath: path + "/" + entry) }
        } else {
            try? manager.createDirectory(atPath: path, withIntermediateDirectories: true)
        }
        let pdf = Self.onePagePDF
        _ = FileManager.default.createFile(atPath: path + "/doc.pdf", contents: Data(pdf))
        let metadata = Array(#"{"title":"t","created":0,"modified":0,"page_count":1,"tags":[],"ocr_completed":false,"full_text":""}"#.utf8)
        _ = FileManager.default.createFile(atPath: path + "/doc.yianazip", contents: Data(metadata + [0xFF, 0xFF, 0xFF, 0xFF] + pdf))
    }


    /// A one-page PDF with a line of text.
    static let onePagePDF = PDFFixtures.pdf([PDFFixtures.Page(mediaBox: [0, 0, 300, 400], content: "BT /F1 12 Tf 72 320 Td (fuzz) Tj ET")])
}
