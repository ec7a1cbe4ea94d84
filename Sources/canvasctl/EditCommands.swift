import ArgumentParser
import CanvasCore
import CanvasProtocol

// The drawing edits besides `draw`, one subcommand each, so none needs `canvasctl call`.
// Coordinates may be negative: they are parsed unconditionally, so `--x -5` is a value, not an
// unknown option.

struct Undo: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Undo the last edit.")
    @OptionGroup var connection: Connection
    @OptionGroup var session: SessionOption
    func run() throws { try connection.call("drawing.undo", session: session.session) }
}

struct Redo: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Redo the last undone edit.")
    @OptionGroup var connection: Connection
    @OptionGroup var session: SessionOption
    func run() throws { try connection.call("drawing.redo", session: session.session) }
}

struct Clear: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Remove every stroke and text (one undo step).")
    @OptionGroup var connection: Connection
    @OptionGroup var session: SessionOption
    func run() throws { try connection.call("drawing.clear", session: session.session) }
}

struct Erase: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Erase the ink within --radius of --x, --y.")
    @OptionGroup var connection: Connection
    @OptionGroup var session: SessionOption
    @Option(parsing: .unconditional, help: "Where the eraser touches.") var x: Double
    @Option(parsing: .unconditional, help: "Where the eraser touches.") var y: Double
    @Option(help: "The eraser's radius in points, 0.01 to 1e6.") var radius = 10.0
    @Option(help: "stroke: remove whole strokes it touches; partial: cut out only what it covers.") var mode = EraseMode.stroke

    func run() throws {
        try connection.call("drawing.erase", ["x": .number(x), "y": .number(y), "radius": .number(radius), "mode": .string(mode.rawValue)],
                            session: session.session)
    }
}

struct MoveText: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "move-text", abstract: "Move a text's corner to --x, --y.")
    @OptionGroup var connection: Connection
    @OptionGroup var session: SessionOption
    @Option(help: "The text's index in get-drawing's texts, from 0.") var index: Int
    @Option(parsing: .unconditional, help: "The new corner.") var x: Double
    @Option(parsing: .unconditional, help: "The new corner.") var y: Double

    func run() throws {
        try connection.call("drawing.moveText", ["index": .integer(Int64(index)), "x": .number(x), "y": .number(y)],
                            session: session.session)
    }
}

struct EditText: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "edit-text", abstract: "Change a text: move or nudge it, resize, recolour or reword it (one undo step).")
    @OptionGroup var connection: Connection
    @OptionGroup var session: SessionOption
    @Option(help: "The text's index in get-drawing's texts, from 0.") var index: Int
    @Option(parsing: .unconditional, help: "Move the corner here.") var x: Double?
    @Option(parsing: .unconditional, help: "Move the corner here.") var y: Double?
    @Option(parsing: .unconditional, help: "Nudge by this much, after any move.") var dx: Double?
    @Option(parsing: .unconditional, help: "Nudge by this much, after any move.") var dy: Double?
    @Option(help: "The new size in points, 8 to 48.") var fontSize: Double?
    @Option(help: "A named colour or #RRGGBB.") var color: String?
    @Option(help: "The new words.") var text: String?

    func validate() throws {
        guard [x, y, dx, dy, fontSize].contains(where: { $0 != nil }) || color != nil || text != nil else {
            throw ValidationError("give at least one of --x, --y, --dx, --dy, --font-size, --color, --text")
        }
    }

    func run() throws {
        var params: [String: JSONValue] = ["index": .integer(Int64(index))]
        for (name, value) in [("x", x), ("y", y), ("dx", dx), ("dy", dy), ("fontSize", fontSize)] {
            if let value { params[name] = .number(value) }
        }
        if let color { params["color"] = .string(color) }
        if let text { params["text"] = .string(text) }
        try connection.call("drawing.editText", params, session: session.session)
    }
}
