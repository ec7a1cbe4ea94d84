import CanvasOperations
import CanvasCore
import CanvasProtocol
import Foundation
import InkRendering
import Logging

/// A result's image as made before the result ran: rendered off the loop, or left out because
/// it could not be (the result then says `imageOmitted` with the reason; a render stopped at
/// its deadline says `timeout`).
enum ResultImage {
    case rendered(Result<String, RenderError>)
    case omitted(reason: String)
}

/// The one place where what the canvas machine asks for happens: events published, timers
/// started, warnings logged, result images rendered. The machine decides; this carries out.
struct ActionExecutor {
    let logger: Logger
    let maxImageSide: Int
    let imageTimeBudget: Duration

    /// Carries out `actions` for `session`. Returns the CanvasResult emitted, if any, with the
    /// image when the caller asked for it. `rendered` is that image when a job made it off the
    /// loop first, from the drawing the result reports (the job held the session meanwhile), or
    /// its omission; nil renders it here (a small one: `rendersOffLoop`).
    @discardableResult
    func run(_ actions: [CanvasAction], _ session: inout ServiceSession, imageData: Bool,
             rendered: ResultImage? = nil, _ call: inout Call) -> [String: JSONValue]? {
        var canvasResult: [String: JSONValue]?
        for action in actions {
            switch action {
            case .stateChanged(let from, let to, let cause):
                publish(&session, "canvas.stateChanged",
                        ["from": .string(from.rawValue), "to": .string(to.rawValue), "state": .string(to.rawValue),
                         "cause": .string(cause.rawValue)], &call)
            case .emitResult(let result, let drawing, let cause):
                var json: [String: JSONValue] = ["action": .string(result.action.rawValue), "hasContent": .bool(result.hasContent)]
                var image: String?, omitted: JSONValue?
                if imageData || session.resultImages {
                    switch rendered {
                    case .omitted(let reason)?: omitted = .string(reason)
                    case .rendered(let result)?: (image, omitted) = png(result, session)
                    case nil:
                        (image, omitted) = png(Self.png(drawing, size: session.size, maxImageSide: maxImageSide,
                                                        deadline: RenderDeadline(.now + imageTimeBudget)), session)
                    }
                }
                if imageData { json["imageData"] = image.map { .string($0) }; json["imageOmitted"] = omitted }
                canvasResult = json
                var eventData = json
                eventData["cause"] = .string(cause.rawValue)
                eventData["imageData"] = nil
                eventData["imageOmitted"] = session.resultImages ? omitted : nil
                if session.resultImages, let image {
                    // Every subscriber that does not read holds its events: their size is bounded.
                    if image.utf8.count <= Limits.maxEventImageBytes {
                        eventData["imageData"] = .string(image)
                    } else {
                        eventData["imageOmitted"] = "tooLarge"
                    }
                }
                publish(&session, "canvas.result", eventData, &call)
            case .startTransitionTimer(let ticket, let milliseconds):
                call.timers.append(TransitionTimer(deadline: call.now + .milliseconds(milliseconds), session: session.id, ticket: ticket))
            case .toolChanged(let tools):
                publish(&session, "pencil.toolChanged", ["tool": WireShapes.tools(tools)], &call)
            case .save:
                break   // a job's, not an event: the dispatcher starts it (`MethodResult.saving`)
            case .logWarning(let message):
                // The client hears of it in its reply and events; the log keeps the first of a
                // session's, so a client that repeats it (a fuzzer) does not fill the terminal.
                if session.warned {
                    logger.debug("\(message)", metadata: ["session": "\(session.id)"])
                } else {
                    logger.warning("\(message); this session's next ones are logged at debug level", metadata: ["session": "\(session.id)"])
                }
                session.warned = true
            }
        }
        return canvasResult
    }

    /// An event of `session`, numbered in its own sequence.
    func publish(_ session: inout ServiceSession, _ name: String, _ data: [String: JSONValue], _ call: inout Call) {
        call.output.events.append(ReplyEncoder.event(session: session.id, name: name, seq: session.nextSeq(), data: data))
    }

    /// The image; or none, left out (`timeout`) when its render passed the time budget, or
    /// nil (logged) when Cairo could not make it.
    private func png(_ rendered: Result<String, RenderError>, _ session: ServiceSession) -> (image: String?, omitted: JSONValue?) {
        do {
            return (try rendered.get(), nil)
        } catch where error.pastDeadline {
            logger.notice("imageData left out: its render passed the time budget",
                          metadata: ["session": "\(session.id)", "budgetMs": "\(imageTimeBudget.milliseconds)", "at": "\(error.operation)"])
            return (nil, "timeout")
        } catch {
            // Said to the client too: an image asked for is never silently missing.
            logger.error("imageData not rendered", metadata: ["session": "\(session.id)", "error": "\(error)"])
            return (nil, "renderFailed")
        }
    }

    /// The result image of `drawing` as base64 PNG: `size` when the session has one, else the
    /// drawing's extent, each side capped; past `deadline` the render stops and fails
    /// (`pastDeadline`). Pure, so a job may run it off the loop.
    static func png(_ drawing: Drawing, size: (width: Int, height: Int)?, maxImageSide: Int,
                    deadline: RenderDeadline) -> Result<String, RenderError> {
        let extent = InkRenderer.extent(of: drawing)
        let width = min(size?.width ?? extent.width, maxImageSide)
        let height = min(size?.height ?? extent.height, maxImageSide)
        return Result { () throws(RenderError) in
            let bytes = try InkRenderer.png(drawing, width: width, height: height, deadline: deadline)
            // Base64 of the largest PNG is a few hundred milliseconds of its own.
            try deadline.check("encode the PNG as base64")
            return Data(bytes).base64EncodedString()
        }
    }

    /// The drawing of the result among `actions` whose image `run` would render for `session`
    /// (`imageData`: the reply asks for it), when rendering it on the loop would take long: a
    /// job renders it first, and `run` is given the image.
    func imageToRender(_ actions: [CanvasAction], _ session: ServiceSession, imageData: Bool) -> Drawing? {
        guard imageData || session.resultImages, let drawing = actions.emittedResult?.drawing,
              Self.rendersOffLoop(drawing, session, maxImageSide: maxImageSide) else { return nil }
        return drawing
    }

    /// Whether rendering `drawing` for `session` takes long enough (a millisecond or more) to
    /// hold up every other client if done on the loop: many points, many pixels to encode, or
    /// long lines of ink (a few points far apart cost as much as thousands close together:
    /// each segment is outlined, and filled, over all the cells and rows it crosses).
    static func rendersOffLoop(_ drawing: Drawing, _ session: ServiceSession, maxImageSide: Int) -> Bool {
        if drawing.pointCount > Dispatcher.inlineDrawingPoints { return true }
        let extent = session.size ?? InkRenderer.extent(of: drawing)
        if min(extent.width, maxImageSide) * min(extent.height, maxImageSide) > 250_000 { return true }
        return inkLength(drawing) > maxInlineInkLength
    }

    /// The most centre line, in points, a result image rendered on the loop may have: several
    /// pages of handwriting, whose points lie a point or two apart.
    static let maxInlineInkLength = 50_000.0

    /// The length of every stroke's polyline together, stopping once past the inline bound
    /// (at most `inlineDrawingPoints` points are measured).
    static func inkLength(_ drawing: Drawing) -> Double {
        var length = 0.0
        for stroke in drawing.strokes {
            for (a, b) in zip(stroke.points, stroke.points.dropFirst()) {
                length += ((b.x - a.x) * (b.x - a.x) + (b.y - a.y) * (b.y - a.y)).squareRoot()
            }
            if length > maxInlineInkLength { break }
        }
        return length
    }
}
