public import CanvasCore
public import CanvasModel
public import CanvasProtocol

/// The wire form of model commands, and the check of a reply against the model's prediction:
/// shared by the wire fuzzer and the load benchmark, which must agree on what "right" means.
public enum WireCommands {
    /// The method and params that carry `command` over the wire.
    public static func request(_ command: CanvasCommand) throws -> (method: String, params: [String: JSONValue]) {
        switch command {
        case .open: return ("canvas.open", [:])
        case .minimize: return ("canvas.minimize", [:])
        case .submit: return ("canvas.submit", [:])
        case .cancel: return ("canvas.cancel", [:])
        case .doubleTap: return ("pencil.doubleTap", [:])
        case .finishTransition: return ("canvas.finishTransition", [:])
        case .initialize: return ("canvas.initialize", [:])
        case .timerFired: preconditionFailure("timers are the server's own; the fuzzer uses manual transitions")
        case .configurePencil(let configuration):
            return ("pencil.configure", try JSONCodec.value(of: configuration).objectValue ?? [:])
        case .edit(let edit):
            switch edit {
            case .addStroke(let stroke, let joining):
                var params = try JSONCodec.value(of: stroke).objectValue ?? [:]
                if joining { params["joined"] = true }
                return ("drawing.addStroke", params)
            case .addText(let text): return ("drawing.addText", try JSONCodec.value(of: text).objectValue ?? [:])
            case .erase(let request): return ("drawing.erase", try JSONCodec.value(of: request).objectValue ?? [:])
            case .moveText(let index, let x, let y):
                return ("drawing.moveText", ["index": .integer(Int64(index)), "x": .number(x), "y": .number(y)])
            case .editText(let index, let change):
                var params: [String: JSONValue] = ["index": .integer(Int64(index))]
                for (key, value) in [("x", change.x), ("y", change.y), ("dx", change.dx), ("dy", change.dy), ("fontSize", change.fontSize)] {
                    if let value { params[key] = .number(value) }
                }
                if let color = change.color { params["color"] = .string(color.rawValue) }
                if let text = change.text { params["text"] = .string(text) }
                return ("drawing.editText", params)
            case .undo: return ("drawing.undo", [:])
            case .redo: return ("drawing.redo", [:])
            case .clear: return ("drawing.clear", [:])
            }
        }
    }

    /// Why a reply is not what the model expected, or nil when it is.
    public static func check(_ reply: Result<[String: JSONValue], ProtocolError>, against expected: Observation) -> String? {
        switch (reply, expected.reply) {
        case (.failure(let error), .rejected(let reason)):
            guard error.code == .invalidState, error.data["reason"] == .string(reason.rawValue) else {
                return "expected INVALID_STATE \(reason), got \(error)"
            }
        case (.failure(let error), .invalidEdit(.noSuchText)):
            guard error.code == .notFound else { return "expected NOT_FOUND, got \(error)" }
        case (.failure(let error), .invalidEdit(.cannotJoin(let refusal))):
            guard error.code == .invalidParams, error.data["field"] == "joined", error.data["reason"] == .string(refusal.rawValue) else {
                return "expected INVALID_PARAMS joined \(refusal.rawValue), got \(error)"
            }
        case (.failure(let error), _):
            return "expected success, got \(error)"
        case (.success(let result), .accepted):
            if result["state"] != .string(expected.phase.rawValue) { return "reply state \(String(describing: result["state"]))" }
            if let problem = compareResult(result["action"] == nil ? nil : result, expected.result) { return problem }
        case (.success(let result), .edited(let changed)):
            if result["changed"] != .bool(changed) { return "reply changed=\(String(describing: result["changed"])), expected \(changed)" }
        case (.success(let result), .doubleTap(let outcome)):
            if result["outcome"] != .string(outcome.name) { return "outcome \(String(describing: result["outcome"]))" }
            if case .ignored(let reason) = outcome, result["reason"] != .string(reason.rawValue) {
                return "ignore reason \(String(describing: result["reason"]))"
            }
            if let problem = compareResult(result["canvasResult"]?.objectValue, expected.result) { return problem }
        case (.success(let result), _):
            return "expected \(expected.reply), got success \(result)"
        }
        return nil
    }

    private static func compareResult(_ actual: [String: JSONValue]?, _ expected: CanvasResult?) -> String? {
        switch (actual, expected) {
        case (nil, nil): return nil
        case (let actual?, let expected?):
            if actual["action"] == .string(expected.action.rawValue), actual["hasContent"] == .bool(expected.hasContent) { return nil }
            return "CanvasResult \(actual), expected \(expected)"
        default:
            return "CanvasResult \(String(describing: actual)), expected \(String(describing: expected))"
        }
    }
}

/// Random commands in the mix the wire fuzzer uses, replayable from a seed.
public struct RandomCommands {
    private var random: SeededGenerator

    public init(seed: UInt64) { random = SeededGenerator(seed: seed) }

    public mutating func pencil() -> PencilConfiguration {
        PencilConfiguration(supported: Int.random(in: 0..<6, using: &random) > 0,
                            preferredTapAction: PreferredTapAction.allCases.randomElement(using: &random)!,
                            policy: TapPolicy.allCases.randomElement(using: &random)!)
    }

    private mutating func coordinate() -> Double { (Double.random(in: 0...200, using: &random) * 100).rounded() / 100 }

    public mutating func next() -> CanvasCommand {
        switch Int.random(in: 0..<20, using: &random) {
        case 0, 1, 2, 3: return .doubleTap
        case 4: return .open
        case 5: return .minimize
        case 6, 7: return .finishTransition
        case 8: return .submit
        case 9: return .cancel
        case 10: return .edit(.addStroke(stroke()))
        case 11:
            // One pen from one corner back to it: joined, it often continues the stroke before
            // (the server's step worked out from its history, the model's remembered).
            let corner = try! InkPoint(x: 100, y: 100)
            let points = [corner] + stroke().points + [corner]
            return .edit(.addStroke(try! Stroke(tool: .pen, color: .black, width: 2, points: points),
                                    joiningLastStep: Bool.random(using: &random)))
        case 12: return .edit(.addText(try! TextAnnotation(text: ["Hi", "Ünï ✓", "two\nlines"].randomElement(using: &random)!,
                                                           x: coordinate(), y: coordinate(),
                                                           fontSize: Double(Int.random(in: 8...48, using: &random)),
                                                           color: InkColor(["red", "#112233"].randomElement(using: &random)!))))
        case 13: return .edit(.erase(try! EraseRequest(x: coordinate(), y: coordinate(), radius: Double.random(in: 2...50, using: &random),
                                                       mode: EraseMode.allCases.randomElement(using: &random)!)))
        case 14: return .edit(.undo)
        case 15: return .edit(.redo)
        case 16: return .edit(.clear)
        case 17: return .edit(.moveText(index: Int.random(in: 0...2, using: &random), x: coordinate(), y: coordinate()))
        case 18: return .initialize
        default: return .configurePencil(pencil())
        }
    }

    public mutating func stroke() -> Stroke {
        let count = Int.random(in: 1...8, using: &random)
        let withPressure = Bool.random(using: &random)
        let points = (0..<count).map { _ in
            try! InkPoint(x: coordinate(), y: coordinate(),
                          pressure: withPressure ? (Double.random(in: 0...1, using: &random) * 1000).rounded() / 1000 : nil)
        }
        return try! Stroke(tool: InkTool.allCases.randomElement(using: &random)!, color: InkColor(["black", "blue", "#FFCC00"].randomElement(using: &random)!),
                           width: Double(Int.random(in: 1...20, using: &random)), points: points)
    }
}
