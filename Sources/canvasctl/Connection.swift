import ArgumentParser
import CanvasClient
import CanvasProtocol
import Foundation
import ZeroMQ

struct Connection: ParsableArguments {
    // The environment can name another server once for a whole shell session, so the same
    // commands reach a canvasd on other endpoints (the README's walkthrough runs this way in
    // the tests). Optional here, so --help shows the one default the help text states.
    @Option(name: .customLong("endpoint"),
            help: "The server's request endpoint (default: $CANVAS_ENDPOINT, else tcp://127.0.0.1:5555).")
    var endpointOption: String?

    @Option(name: .customLong("events"),
            help: "The server's event endpoint (default: $CANVAS_EVENTS, else tcp://127.0.0.1:5556).")
    var eventsOption: String?

    @Option(help: "Milliseconds to wait for a reply.")
    var timeout: Int32 = 5_000

    @Option(name: .customLong("server-key"), help: "The server's public key: a .pub file, or its 40 Z85 characters.")
    var serverKey: String?

    @Option(name: .customLong("client-key"), help: "This client's key pair file (canvasctl keygen), for a server with CurveZMQ.")
    var clientKey: String?

    var endpoint: String { endpointOption ?? ProcessInfo.processInfo.environment["CANVAS_ENDPOINT"] ?? "tcp://127.0.0.1:5555" }
    var events: String { eventsOption ?? ProcessInfo.processInfo.environment["CANVAS_EVENTS"] ?? "tcp://127.0.0.1:5556" }

    func validate() throws {
        guard (serverKey == nil) == (clientKey == nil) else { throw ValidationError("--server-key and --client-key go together") }
        guard timeout > 0 else { throw ValidationError("--timeout is a number of milliseconds, at least 1") }
    }

    /// The CurveZMQ credentials, when both keys are given.
    func credentials() throws -> CurveCredentials? {
        guard let serverKey, let clientKey else { return nil }
        do {
            return CurveCredentials(serverKey: try CurveKeyFile.publicKey(serverKey), client: try CurveKeyFile.keyPair(at: clientKey))
        } catch {
            throw ValidationError(error.description)
        }
    }

    func client() throws -> Server {
        do {
            return Server(client: try CanvasClient(endpoint: endpoint, timeoutMilliseconds: timeout, curve: try credentials()),
                          connection: self)
        } catch let error as ZMQError {
            throw CommandFailure("cannot connect to \(endpoint): \(error.description)")
        }
    }

    /// Calls a method and prints its result as JSON; an error reply exits non-zero.
    func call(_ method: String, _ params: [String: JSONValue] = [:], session: String? = nil) throws {
        printJSON(try resultOrFail(client().call(method, params, session: session)))
    }
}

/// canvasd as canvasctl reaches it: a call that gets no reply says which endpoint it tried.
struct Server {
    let client: CanvasClient
    let connection: Connection

    func call(_ method: String, _ params: [String: JSONValue] = [:], session: String? = nil, frames: [[UInt8]] = [])
        throws -> Result<[String: JSONValue], ProtocolError> {
        do throws(ClientError) {
            return try client.call(method, params, session: session, frames: frames)
        } catch {
            switch error {
            case .timeout:
                throw CommandFailure("""
                    \(method): no reply from \(connection.endpoint) within \(connection.timeout) ms. Is canvasd running \
                    there? (--endpoint or $CANVAS_ENDPOINT names another server; --timeout waits longer)
                    """)
            case .transport, .malformedReply:
                throw CommandFailure("\(method) to \(connection.endpoint): \(error.description)")
            }
        }
    }
}

/// A failure the user can act on: one line, exit status 1.
struct CommandFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// A reply's result; an error reply is written out and exits non-zero, as `fail` does.
func resultOrFail(_ reply: Result<[String: JSONValue], ProtocolError>) throws -> [String: JSONValue] {
    switch reply {
    case .success(let result): return result
    case .failure(let error): try fail(error)
    }
}

/// One JSON object on one line of standard output.
func printJSON(_ object: [String: JSONValue]) {
    print(String(decoding: JSONCodec.serialize(.object(object)), as: UTF8.self))
}

/// An error reply as one JSON line on standard error, and exit status 2.
func fail(_ error: ProtocolError) throws -> Never {
    var body: [String: JSONValue] = ["code": .string(error.code.rawValue), "message": .string(error.message)]
    if !error.data.isEmpty { body["data"] = .object(error.data) }
    FileHandle.standardError.write(Data(JSONCodec.serialize(.object(body)) + [10]))
    throw ExitCode(2)
}

struct SessionOption: ParsableArguments {
    @Option(help: "The session id (from open-session).")
    var session: String
}

func parseObject(_ text: String, _ what: String) throws -> [String: JSONValue] {
    guard let value = try? JSONCodec.parse(Array(text.utf8)), let object = value.objectValue else {
        throw ValidationError("\(what) must be a JSON object")
    }
    return object
}

/// Refuses a file canvasctl cannot read, naming it and the system's reason (errno).
func requireReadable(_ path: String, _ what: String) throws {
    guard access(path, R_OK) == 0 else {
        let code = errno
        throw CommandFailure("\(what) \(path): cannot read it: \(String(cString: strerror(code))) (errno \(code))")
    }
}

/// Refuses an output path whose folder canvasctl cannot write into, before any work.
func requireWritableFolder(of path: String, _ what: String) throws {
    let folder = (path as NSString).deletingLastPathComponent
    guard access(folder.isEmpty ? "." : folder, W_OK) == 0 else {
        let code = errno
        throw CommandFailure("\(what) \(path): cannot write into \(folder.isEmpty ? "." : folder): \(String(cString: strerror(code))) (errno \(code))")
    }
}
