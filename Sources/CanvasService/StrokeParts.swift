import CanvasCore
import CanvasProtocol

/// A stroke arriving in parts: `drawing.addStroke` with `continued: true` sends some of its
/// points, and the part without it completes the stroke, which is then added as one stroke and
/// one undo step. A browser cannot send a frame of 128 KiB or more, and a long stroke's points
/// can be more than that.
///
/// The parts wait in the session, outside the drawing; any other method that changes the
/// session (an edit, a state change) drops them, so a half-sent stroke never lingers. A
/// refused request, a refused part included, leaves them as they were. Each part
/// was acknowledged, so the parts go into the session's snapshot too (SessionSnapshot): a
/// stroke half sent when its instance dies is finished on the instance that takes it over.
struct StrokeParts: Codable {
    /// tool, color and width as the first part gave them; later parts must repeat them.
    let style: [String: JSONValue]
    var points: [JSONValue]
}

extension SessionParams {
    /// The stroke's whole params once the last part is in, or nil while parts are waiting (the
    /// reply then says how many points wait).
    func assembleStroke(_ params: Params, _ session: inout ServiceSession) throws(ProtocolError) -> Params? {
        let continued = try params.bool("continued", default: false)
        guard continued || session.strokeParts != nil else { return params }
        try CanvasMethods.requireOpen(session)
        guard case .array(let points)? = params.values["points"], !points.isEmpty else {
            throw ProtocolError(.invalidParams, "points: a part needs at least one point", data: ["field": "points"])
        }
        // Each part is checked as a stroke of its own as it arrives, so a bad point is refused
        // with the part that carries it (its path within this part's `points`), not later.
        if points.count > limits.maxPointsPerStroke { throw Self.tooLarge("points", points.count, limits.maxPointsPerStroke) }
        _ = try params.decode(Stroke.self)
        // The style is what a stroke has besides its points; unknown params are ignored here
        // as everywhere, so parts that differ only in them agree.
        let style = params.values.filter { ["tool", "color", "width"].contains($0.key) }
        var parts = session.strokeParts ?? StrokeParts(style: style, points: [])
        // Compared as written, not case by case: `3` and `3.0` are one width, and parts that
        // came back from a snapshot hold their numbers as JSON decoding gave them. A refused
        // part adds nothing: the parts before it still wait for a right one.
        guard JSONCodec.serialize(.object(parts.style)) == JSONCodec.serialize(.object(style)) else {
            throw ProtocolError(.invalidParams, "a stroke's parts must all have the same tool, color and width; the parts so far still wait",
                                data: ["field": "continued"])
        }
        if parts.points.count + points.count > limits.maxPointsPerStroke {
            throw Self.tooLarge("points", parts.points.count + points.count, limits.maxPointsPerStroke)
        }
        parts.points += points
        guard !continued else {
            session.strokeParts = parts
            return nil
        }
        session.strokeParts = nil
        var whole = parts.style
        whole["points"] = .array(parts.points)
        return Params(whole)
    }
}
