import CanvasCore
import CanvasModel
import PropertyBased

/// Random values for the property and model-based tests. Coordinates stay in a small area
/// so that random eraser touches often land on random strokes.
enum Generators {
    static let colors = ["black", "blue", "red", "purple", "#FFCC00", "#00aa11"]

    static var point: Generator<InkPoint, some SendableSequenceType> {
        zip(Gen.double(in: 0...200), Gen.double(in: 0...200), Gen.double(in: 0...1).optional)
            .map { x, y, pressure in try! InkPoint(x: x, y: y, pressure: pressure) }
    }

    static var stroke: Generator<Stroke, some SendableSequenceType> {
        zip(Gen<InkTool>.case, Gen.element(of: colors), Gen.double(in: 0.5...20), point.array(of: 1...8))
            .map { tool, color, width, points in
                try! Stroke(tool: tool, color: InkColor(color!), width: width, points: points)
            }
    }

    static var text: Generator<TextAnnotation, some SendableSequenceType> {
        zip(Gen.element(of: ["Hi", "Ünïcode ✓", "x", "two\nlines"]), Gen.double(in: 0...200),
            Gen.double(in: 0...200), Gen.double(in: 8...48), Gen.element(of: colors))
            .map { text, x, y, size, color in
                try! TextAnnotation(text: text!, x: x, y: y, fontSize: size, color: InkColor(color!))
            }
    }

    /// Drawings of every kind: empty, strokes only, texts only, both.
    static var drawing: Generator<Drawing, some SendableSequenceType> {
        zip(stroke.array(of: 0...4), text.array(of: 0...3)).map { Drawing(strokes: $0, texts: $1) }
    }

    static var pencilConfiguration: Generator<PencilConfiguration, some SendableSequenceType> {
        zip(Gen.bool(0.85), Gen<PreferredTapAction>.case, Gen<TapPolicy>.case)
            .map { PencilConfiguration(supported: $0, preferredTapAction: $1, policy: $2) }
    }

    static var transitions: Generator<TransitionMode, some SendableSequenceType> {
        Gen.int(in: 0...2).map { [TransitionMode.instant, .manual, .timed(milliseconds: 150)][$0] }
    }

    /// A session's set-up: pencil configuration, transitions, and whether it starts initialized.
    static var setup: Generator<SessionSetup, some SendableSequenceType> {
        zip(pencilConfiguration, transitions, Gen.bool(0.8))
            .map { SessionSetup(pencil: $0, transitions: $1, initialized: $2) }
    }

    /// One command of any kind. Lower kinds are the toggles, so shrinking (towards 0) leaves
    /// the commands that matter to the canvas's state.
    static var command: Generator<CanvasCommand, some SendableSequenceType> {
        zip(Gen.int(in: 0...18), stroke, text, erase, pencilConfiguration, Gen.int(in: 0...4))
            .map { kind, stroke, text, erase, configuration, small in
                switch kind {
                case 0, 1, 2: return .doubleTap
                case 3: return .open
                case 4: return .minimize
                case 5: return .finishTransition
                case 6: return .submit
                case 7: return .cancel
                case 8: return .edit(.addStroke(stroke))
                case 9:
                    // Strokes that start and end at one point in one style, so a joined one
                    // often continues the stroke before it and sometimes does not.
                    let corner = try! InkPoint(x: 100, y: 100)
                    let piece = try! Stroke(tool: .pen, color: InkColor(small < 4 ? "black" : "#000000"), width: 2,
                                            points: [corner] + stroke.points + [corner])
                    return .edit(.addStroke(piece, joiningLastStep: small % 2 == 0))
                case 10: return .edit(.addText(text))
                case 11: return .edit(.erase(erase))
                case 12: return .edit(.undo)
                case 13: return .edit(.redo)
                case 14: return .edit(.clear)
                case 15: return .edit(.moveText(index: small - 1, x: text.x, y: text.y))
                case 16: return .timerFired(ticket: UInt64(small))
                case 17: return .initialize
                default: return .configurePencil(configuration)
                }
            }
    }

    static var erase: Generator<EraseRequest, some SendableSequenceType> {
        zip(Gen.double(in: 0...200), Gen.double(in: 0...200), Gen.double(in: 1...60), Gen<EraseMode>.case)
            .map { x, y, radius, mode in try! EraseRequest(x: x, y: y, radius: radius, mode: mode) }
    }

    static var commands: Generator<[CanvasCommand], some SendableSequenceType> {
        command.array(of: 0...40)
    }
}

struct SessionSetup: Sendable, CustomStringConvertible {
    var pencil: PencilConfiguration
    var transitions: TransitionMode
    var initialized: Bool

    func session() -> CanvasSession {
        CanvasSession(pencil: pencil, transitions: transitions, initialized: initialized)
    }

    func model() -> ReferenceCanvas {
        ReferenceCanvas(pencil: pencil, transitions: transitions, initialized: initialized)
    }

    var description: String {
        "transitions: \(transitions), pencil: \(pencil.supported ? "supported" : "unsupported") "
            + "\(pencil.preferredTapAction) \(pencil.policy), initialized: \(initialized)"
    }
}
