import CanvasCore
import CanvasProtocol
import Logging

/// The methods that need no session: `hello` and `session.open`.
struct ServerMethods {
    let limits: Limits
    let params: SessionParams
    let idleTimeout: Duration
    /// Whether clients are authenticated (CurveZMQ): a client is then its key, otherwise its
    /// connection.
    let authenticated: Bool
    let logger: Logger
    /// This instance's name (`--instance`), so a client or an operator knows which answered.
    let instance: String

    static let serverName = "canvasd/0.2.0"

    func hello() -> [String: JSONValue] {
        [
            "protocol": .string(ProtocolVersion.string),
            "server": .string(Self.serverName),
            "methods": .array(Method.allCases.map { .string($0.rawValue) }),
            "limits": .object(limits.json.objectValue ?? [:]),
            "idleTimeoutMs": .integer(Int64(idleTimeout.components.seconds * 1000)),
            "security": authenticated ? "curve" : "loopback",
            "instance": .string(instance),
        ]
    }

    /// Who an owner is, for a refusal: never the key or token itself.
    static func describe(_ owner: String?) -> String {
        owner == nil ? "the local owner (every client without a key or token)" : "this owner (key or web token)"
    }

    /// Opens a session for `request`: its reply's result, and the session (held in the table
    /// until its persistence has it).
    func openSession(_ params: Params, _ table: inout SessionTable, for request: InFlightRequest, now: ContinuousClock.Instant) throws(ProtocolError)
        -> (result: [String: JSONValue], session: ServiceSession) {
        let pencil = params.has("pencil") ? try params.decode(PencilConfiguration.self, field: "pencil") : PencilConfiguration()
        let transitions = try self.params.transitions(params)
        let initialized = try params.bool("initialized", default: true)
        let resultImages = try params.bool("resultImages", default: false)
        let size = try self.params.size(params)
        guard table.count < limits.maxSessions else {
            throw ProtocolError(.unavailable, "the server has its maximum of \(limits.maxSessions) sessions",
                                data: ["reason": "serverSessions", "limit": .integer(Int64(limits.maxSessions))])
        }
        if table.held(by: request.client, connection: request.connection, authenticated: authenticated) >= limits.maxSessionsPerClient {
            throw ProtocolError(.unavailable, "this client has its maximum of \(limits.maxSessionsPerClient) sessions",
                                data: ["reason": "clientSessions", "limit": .integer(Int64(limits.maxSessionsPerClient))])
        }
        // Counted over every connection of the owner: connections cost nothing to make.
        if table.held(byOwner: request.client) >= limits.maxSessionsPerOwner {
            throw ProtocolError(.unavailable, "\(Self.describe(request.client)) has its maximum of \(limits.maxSessionsPerOwner) sessions, over all its connections",
                                data: ["reason": "ownerSessions", "limit": .integer(Int64(limits.maxSessionsPerOwner))])
        }
        let session = ServiceSession(
            id: table.newID(), owner: request.client, connection: request.connection,
            canvas: CanvasSession(pencil: pencil, transitions: transitions, initialized: initialized),
            transitions: transitions, size: size, resultImages: resultImages, lastActive: now,
            replies: ReplyCache(limits: limits))
        let id = session.id
        // Into the table, held until its persistence has it, by the request's machine (`insert`).
        logger.info("session opened", metadata: ["session": "\(id)", "transitions": "\(transitions)", "client": "\(request.client ?? "-")"])
        return ([
            "session": .string(id),
            "state": .string(session.canvas.phase.rawValue),
            "pencil": WireShapes.pencil(session),
            "transitions": WireShapes.transitions(transitions),
        ], session)
    }
}
