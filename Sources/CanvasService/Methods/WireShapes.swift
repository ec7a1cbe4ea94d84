import CanvasCore
import CanvasProtocol
import Foundation

/// The JSON shapes of results and events that several methods share, as the spec writes them.
enum WireShapes {
    /// Writes `canvas.state`'s result as JSON text, keys in the sorted order `JSONCodec`
    /// writes: it is what clients poll, and building the object first costs more than the rest
    /// of the request. A test holds it byte for byte to the result built as values.
    static func writeState(_ session: ServiceSession, into out: inout JSONText) {
        let pencil = session.canvas.pencil, tools = session.canvas.pencil.tools
        out.raw(#"{"hasContent":"#); out.bool(session.canvas.hasContent)
        out.raw(#","pencil":{"initialized":"#); out.bool(pencil.initialized)
        out.raw(#","policy":"#); out.string(pencil.configuration.policy.rawValue)
        out.raw(#","preferredTapAction":"#); out.string(pencil.configuration.preferredTapAction.rawValue)
        out.raw(#","supported":"#); out.bool(pencil.configuration.supported)
        out.raw(#"},"seq":"#); out.integer(Int64(clamping: session.seq))
        if let size = session.size {
            out.raw(#","size":{"height":"#); out.integer(Int64(size.height))
            out.raw(#","width":"#); out.integer(Int64(size.width))
            out.raw("}")
        }
        out.raw(#","state":"#); out.string(session.canvas.phase.rawValue)
        out.raw(#","tool":{"current":"#); out.string(tools.current.rawValue)
        out.raw(#","previous":"#); out.string(tools.previous.rawValue)
        switch session.transitions {
        case .instant: out.raw(#"},"transitions":"instant"}"#)
        case .manual: out.raw(#"},"transitions":"manual"}"#)
        case .timed(let ms): out.raw(#"},"transitions":{"ms":"#); out.integer(Int64(ms)); out.raw("}}")
        }
    }

    static func pencil(_ session: ServiceSession) -> JSONValue {
        let pencil = session.canvas.pencil
        return [
            "supported": .bool(pencil.configuration.supported),
            "preferredTapAction": .string(pencil.configuration.preferredTapAction.rawValue),
            "policy": .string(pencil.configuration.policy.rawValue),
            "initialized": .bool(pencil.initialized),
        ]
    }

    static func tools(_ tools: ToolSelection) -> JSONValue {
        ["current": .string(tools.current.rawValue), "previous": .string(tools.previous.rawValue)]
    }

    static func transitions(_ mode: TransitionMode) -> JSONValue {
        switch mode {
        case .instant: return "instant"
        case .manual: return "manual"
        case .timed(let ms): return ["ms": .integer(Int64(ms))]
        }
    }

    /// `drawing.get`'s result as JSON text, straight from the drawing's own encoding: one
    /// encoding for every size, whether written in the loop or on a worker.
    static func drawing(_ drawing: Drawing, canUndo: Bool, canRedo: Bool) -> [UInt8] {
        // Keys sorted, as every other reply has them, so the same drawing is the same bytes on
        // any instance (an encoder's dictionary order changes with each process's hash seed).
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        var members = (try? encoder.encode(drawing)).map { Array($0) } ?? []
        if members.first == UInt8(ascii: "{") { members.removeFirst() } else { members = Array(#""strokes":[],"texts":[]}"#.utf8) }
        return Array(#"{"canRedo":\#(canRedo),"canUndo":\#(canUndo),"#.utf8) + members
    }

    /// The data of a `document.saved` event: the new summary and what caused the save.
    static func saved(_ summary: [String: JSONValue], cause: String) -> [String: JSONValue] {
        var data = summary
        data["cause"] = .string(cause)
        return data
    }
}
