public import ArgumentParser
import CanvasClient
import CanvasCore
import CanvasProtocol
import DocumentStore
import Foundation
import ZeroMQ

@main
struct Canvasctl: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "canvasctl",
        abstract: "A command-line client for canvasd.",
        subcommands: [
            Call.self, Hello.self, OpenSession.self, CloseSession.self, State.self, Open.self, Minimize.self,
            Submit.self, Cancel.self, DoubleTap.self, FinishTransition.self, Draw.self, GetDrawing.self,
            Undo.self, Redo.self, Erase.self, Clear.self, MoveText.self, EditText.self,
            Events.self, Fuzz.self, Keygen.self, Documents.self, DocumentInfo.self, Revisions.self, Restore.self, Flatten.self,
            GetDocument.self, Upload.self,
        ]
    )
}

struct Call: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Call any method: canvasctl call canvas.open --session S")
    @OptionGroup var connection: Connection
    @Argument(help: "The method, e.g. drawing.addStroke.") var method: String
    @Option(help: "The params, as a JSON object.") var params = "{}"
    @Option(help: "The session id, for methods that need one.") var session: String?

    func run() throws { try connection.call(method, try parseObject(params, "--params"), session: session) }
}

struct Hello: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "The server's protocol version, methods and limits.")
    @OptionGroup var connection: Connection
    func run() throws { try connection.call("hello") }
}

struct OpenSession: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Open a session and print its id.")
    @OptionGroup var connection: Connection
    @Option(help: "instant, manual, or a number of milliseconds.") var transitions = "instant"
    @Option(help: "What a double-tap does.") var policy = TapPolicy.alwaysToggle
    @Option(help: "The user's preferred double-tap action.") var preference = PreferredTapAction.switchEraser
    @Flag(help: "A device without pencil interaction.") var noPencil = false
    @Flag(help: "Start uninitialized (double-taps are ignored until canvas.initialize).") var uninitialized = false

    func run() throws {
        let mode: JSONValue = Int64(transitions).map { ["ms": .integer($0)] } ?? .string(transitions)
        try connection.call("session.open", [
            "transitions": mode, "initialized": .bool(!uninitialized),
            "pencil": ["supported": .bool(!noPencil), "policy": .string(policy.rawValue), "preferredTapAction": .string(preference.rawValue)],
        ])
    }
}

struct CloseSession: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Close a session.")
    @OptionGroup var connection: Connection
    @OptionGroup var session: SessionOption
    func run() throws { try connection.call("session.close", session: session.session) }
}

struct State: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "The canvas's state.")
    @OptionGroup var connection: Connection
    @OptionGroup var session: SessionOption
    func run() throws { try connection.call("canvas.state", session: session.session) }
}

struct Open: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Open the canvas (the on-screen button), optionally on a page of a document.",
        discussion: """
            With --document, a later submit flattens the drawing into that page. With --reopen as \
            well, the drawing starts as the page's ink, stroke for stroke, and the submit replaces it.
            """)
    @OptionGroup var connection: Connection
    @OptionGroup var session: SessionOption
    @Option(help: "A document in the server's folder (canvasctl documents lists them).") var document: String?
    @Option(parsing: .unconditional, help: "The page the ink goes to, numbered from 0 (default: 0).") var page: Int?
    @Flag(help: "Load the page's ink as the drawing, to erase or change it; the submit replaces it.") var reopen = false
    @Option(help: "How the submit puts the ink on the page: paper (into its content) or annotations (/Ink and /FreeText).")
    var inkForm: InkForm?

    func validate() throws {
        if page != nil, document == nil { throw ValidationError("--page needs --document") }
        if reopen, document == nil { throw ValidationError("--reopen needs --document") }
        if inkForm != nil, document == nil { throw ValidationError("--ink-form needs --document") }
        if let page, page < 0 { throw ValidationError("--page counts from 0; \(page) is no page") }
    }

    func run() throws {
        var params: [String: JSONValue] = [:]
        if let document { params["document"] = .string(document) }
        if let page { params["page"] = .integer(Int64(page)) }
        if reopen { params["reopen"] = true }
        if let inkForm { params["inkForm"] = .string(inkForm.rawValue) }
        try connection.call("canvas.open", params, session: session.session)
    }
}

/// minimize, submit and cancel share their options: ask for the image, and save it.
struct ResultOptions: ParsableArguments {
    @Option(help: "Write the drawing's PNG here.") var image: String?
}

func finish(_ method: String, _ connection: Connection, _ session: String, _ options: ResultOptions) throws {
    let client = try connection.client()
    switch try client.call(method, ["imageData": .bool(options.image != nil)], session: session) {
    case .success(var result):
        if let path = options.image, let base64 = result["imageData"]?.stringValue, let png = Data(base64Encoded: base64) {
            try png.write(to: URL(fileURLWithPath: path))
            result["imageData"] = .string("(\(png.count) bytes written to \(path))")
        }
        printJSON(result)
    case .failure(let error):
        try fail(error)
    }
}

struct Minimize: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Minimize the canvas, keeping the drawing.")
    @OptionGroup var connection: Connection
    @OptionGroup var session: SessionOption
    @OptionGroup var options: ResultOptions
    func run() throws { try finish("canvas.minimize", connection, session.session, options) }
}

struct Submit: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Submit the drawing.")
    @OptionGroup var connection: Connection
    @OptionGroup var session: SessionOption
    @OptionGroup var options: ResultOptions
    func run() throws { try finish("canvas.submit", connection, session.session, options) }
}

struct Cancel: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Cancel the drawing.")
    @OptionGroup var connection: Connection
    @OptionGroup var session: SessionOption
    @OptionGroup var options: ResultOptions
    func run() throws { try finish("canvas.cancel", connection, session.session, options) }
}

struct DoubleTap: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "An Apple Pencil double-tap.")
    @OptionGroup var connection: Connection
    @OptionGroup var session: SessionOption
    func run() throws { try connection.call("pencil.doubleTap", session: session.session) }
}

struct FinishTransition: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "End the canvas's animation (manual transitions).")
    @OptionGroup var connection: Connection
    @OptionGroup var session: SessionOption
    func run() throws { try connection.call("canvas.finishTransition", session: session.session) }
}

struct Draw: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Add a stroke or a text.",
        discussion: """
            A stroke: canvasctl draw --session S --points '10,10 50,40 90,20'
            A text:   canvasctl draw --session S --text 'Hello' --x 72 --y 100 --font-size 18
            Coordinates are display points of the page, from its top-left corner.
            """)
    @OptionGroup var connection: Connection
    @OptionGroup var session: SessionOption
    @Option(help: "A stroke's points as x,y or x,y,pressure, separated by spaces.") var points: String?
    @Option(help: "A text to place at --x, --y instead of a stroke.") var text: String?
    @Option(parsing: .unconditional, help: "Where the text goes.") var x: Double?
    @Option(parsing: .unconditional, help: "Where the text goes.") var y: Double?
    @Option(help: "The text's size in points, 8 to 48.") var fontSize = 16.0
    @Option(help: "pen or highlighter.") var tool = "pen"
    @Option(help: "A named colour or #RRGGBB.") var color = "black"
    @Option(help: "A stroke's width in points.") var width = 2.0

    func validate() throws {
        guard (points == nil) != (text == nil) else { throw ValidationError("give either --points or --text") }
        if text != nil, x == nil || y == nil { throw ValidationError("--text needs --x and --y") }
    }

    func run() throws {
        if let text, let x, let y {
            try connection.call("drawing.addText", ["text": .string(text), "x": .number(x), "y": .number(y),
                                                    "fontSize": .number(fontSize), "color": .string(color)],
                                session: session.session)
            return
        }
        let parsed: [JSONValue] = try (points ?? "").split(separator: " ").map { item in
            let parts = item.split(separator: ",").compactMap { Double($0) }
            guard parts.count == 2 || parts.count == 3 else { throw ValidationError("bad point \"\(item)\"") }
            var point: [String: JSONValue] = ["x": .number(parts[0]), "y": .number(parts[1])]
            if parts.count == 3 { point["pressure"] = .number(parts[2]) }
            return .object(point)
        }
        try connection.call("drawing.addStroke", ["tool": .string(tool), "color": .string(color), "width": .number(width),
                                                  "points": .array(parsed)], session: session.session)
    }
}

struct GetDrawing: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "get-drawing", abstract: "Print the drawing's strokes and texts.")
    @OptionGroup var connection: Connection
    @OptionGroup var session: SessionOption
    func run() throws { try connection.call("drawing.get", session: session.session) }
}

struct Events: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Print events as they come, one JSON line each.")
    @OptionGroup var connection: Connection
    @Option(help: "Only this session's events. With CurveZMQ keys a client sees only its own sessions, so give one (without it, only the shared documents topic).") var session: String?
    @Option(help: "Stop after this many events.") var count: Int?

    func run() throws {
        let curve = try connection.credentials()
        let subscriber = try EventSubscriber(endpoint: connection.events, prefix: session.map { $0 + "." } ?? (curve == nil ? "" : "documents."),
                                             curve: curve)
        var printed = 0
        while count.map({ printed < $0 }) ?? true {
            guard let (_, body) = try subscriber.next(timeoutMilliseconds: 1_000) else { continue }
            print(String(decoding: JSONCodec.serialize(body), as: UTF8.self))
            // One line as each event comes, also into a pipe, where stdout is block-buffered
            // and a reader killed with the pipeline would otherwise see nothing.
            fflush(nil)
            printed += 1
        }
    }
}

struct Fuzz: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Random toggle and drawing sequences over the wire, checked against the state machine's model.")
    @OptionGroup var connection: Connection
    @Option(help: "The seed; a divergence prints the one that replays it.") var seed: UInt64 = UInt64.random(in: 0...UInt64(UInt32.max))
    @Option(help: "How many commands in all.") var steps = 1_000
    @Option(help: "Commands per session before a new one is opened.") var sessionLength = 80

    func run() throws {
        let fuzzer = try WireFuzzer(endpoint: connection.endpoint, eventsEndpoint: connection.events, seed: seed,
                                    curve: try connection.credentials())
        let report = try fuzzer.run(steps: steps, sessionLength: sessionLength)
        print(report)
        if report.divergence != nil { throw ExitCode(1) }
    }
}

// Choices a shell user types, parsed (and listed in --help) from the model's own enums.
extension TapPolicy: ExpressibleByArgument {}
extension PreferredTapAction: ExpressibleByArgument {}
extension EraseMode: ExpressibleByArgument {}
