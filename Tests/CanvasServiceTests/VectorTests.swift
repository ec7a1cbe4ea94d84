import CanvasClient
import CanvasProtocol
import Foundation
import Testing

/// Replays protocol/vectors/*.json against a live canvasd: the same files the Python suite replays.
@Suite("Protocol test vectors", .serialized)
struct VectorTests {
    struct Case: @unchecked Sendable, CustomStringConvertible {
        let file: String
        let json: [String: JSONValue]
        var description: String { json["name"]?.stringValue ?? "?" }
    }

    static func cases() throws -> [Case] {
        let folder = LiveServer.root.appendingPathComponent("protocol/vectors")
        return try FileManager.default.contentsOfDirectory(atPath: folder.path).filter { $0.hasSuffix(".json") }.sorted().flatMap { name in
            let value = try JSONCodec.parse(Array(try Data(contentsOf: folder.appendingPathComponent(name))))
            return (value["cases"]?.arrayValue ?? []).compactMap(\.objectValue).map { Case(file: name, json: $0) }
        }
    }

    @Test("every vector's replies match", arguments: try cases())
    func replay(_ vector: Case) throws {
        // A server per case: cases stay independent, and every server is stopped when its case ends.
        let server = try LiveServer()
        for (name, content) in vector.json["documents"]?.objectValue ?? [:] {
            if content["folder"]?.boolValue == true {
                try FileManager.default.createDirectory(at: server.folder.appendingPathComponent(name), withIntermediateDirectories: true)
                continue
            }
            let bytes = content["base64"]?.stringValue.flatMap { Data(base64Encoded: $0) } ?? Data((content["text"]?.stringValue ?? "").utf8)
            try bytes.write(to: server.folder.appendingPathComponent(name))
        }
        let client = try server.client()
        var session = ""
        if let params = vector.json["session"]?.objectValue {
            let opened = try client.call("session.open", params)
            session = try #require(opened.value?["session"]?.stringValue, "session.open failed: \(opened)")
        }
        for (index, step) in (vector.json["steps"]?.arrayValue ?? []).enumerated() {
            let step = try #require(step.objectValue)
            var frames = [try Self.firstFrame(step, session: session)]
            for extra in step["frames"]?.arrayValue ?? [] {
                frames.append(Array(try #require(Data(base64Encoded: extra.stringValue ?? ""))))
            }
            let reply = try client.exchange(frames)
            let expected = Self.substitute(try #require(step["expect"]), session: session)
            if let mismatch = VectorMatcher.mismatch(expected, reply) {
                Issue.record("\(vector.file) \"\(vector)\" step \(index): \(mismatch)\n  reply: \(String(decoding: JSONCodec.serialize(reply), as: UTF8.self))")
            }
        }
    }

    static func firstFrame(_ step: [String: JSONValue], session: String) throws -> [UInt8] {
        if let raw = step["raw"]?.stringValue { return Array(raw.replacingOccurrences(of: "$session", with: session).utf8) }
        if let base64 = step["rawBase64"]?.stringValue { return Array(Data(base64Encoded: base64) ?? Data()) }
        var request = substitute(step["send"] ?? .null, session: session)
        if let bytes = step["pad"]?["bytes"]?.integerValue, case .object(var object) = request {
            var params = object["params"]?.objectValue ?? [:]
            params["padding"] = .string(String(repeating: "x", count: Int(bytes)))
            object["params"] = .object(params)
            request = .object(object)
        }
        return JSONCodec.serialize(request)
    }

    static func substitute(_ value: JSONValue, session: String) -> JSONValue {
        switch value {
        case .string("$session"): return .string(session)
        case .array(let array): return .array(array.map { substitute($0, session: session) })
        case .object(let object): return .object(object.mapValues { substitute($0, session: session) })
        default: return value
        }
    }
}

/// The vector pattern rules of protocol/vectors/README.md.
enum VectorMatcher {
    static func mismatch(_ pattern: JSONValue, _ actual: JSONValue?, path: String = "$") -> String? {
        if case .string(let s) = pattern {
            if s == "$any" { return actual == nil ? "\(path): missing" : nil }
            if s == "$absent" { return actual == nil ? nil : "\(path): should be absent" }
            if s.hasPrefix("$prefix:") {
                guard case .string(let a)? = actual, a.hasPrefix(s.dropFirst(8)) else { return "\(path): does not start with \(s.dropFirst(8))" }
                return nil
            }
        }
        guard let actual else { return "\(path): missing" }
        switch (pattern, actual) {
        case (.object(let p), .object(let a)):
            for (key, value) in p {
                if let problem = mismatch(value, a[key], path: "\(path).\(key)") { return problem }
            }
            return nil
        case (.array(let p), .array(let a)):
            guard p.count == a.count else { return "\(path): \(a.count) elements, expected \(p.count)" }
            for (index, (pv, av)) in zip(p, a).enumerated() {
                if let problem = mismatch(pv, av, path: "\(path)[\(index)]") { return problem }
            }
            return nil
        default:
            if let p = pattern.doubleValue, let a = actual.doubleValue {
                return abs(p - a) <= 1e-9 * max(1, abs(p)) ? nil : "\(path): \(a), expected \(p)"
            }
            return pattern == actual ? nil : "\(path): \(actual), expected \(pattern)"
        }
    }
}
