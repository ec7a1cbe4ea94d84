import ArgumentParser
import CanvasCore
import DocumentStore
import Foundation
import InkRendering
import PDFSurgery
import TestSupport

/// Where one flatten's time goes, phase by phase, in this process: reading the PDF, finding the
/// page, outlining and writing the ink, making the increment. Medians of `runs`.
struct FlattenPhases: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "flatten-phases", abstract: "Time the phases of one flatten.",
                                                    shouldDisplay: false)
    @Option var document: String
    @Option var page: Int
    @Option var runs = 9

    func run() throws {
        let drawing = InkPrecision.rounded(try RecordedHandwriting.page())
        var times: [String: [Double]] = [:]
        func timed<T>(_ name: String, _ body: () throws -> T) rethrows -> T {
            let start = ContinuousClock.now
            let value = try body()
            times[name, default: []].append((ContinuousClock.now - start).seconds)
            return value
        }
        for _ in 0...runs {
            var opened: PDFFile? = try timed("open") { try PDFFile(path: document) }
            let geometry = try timed("page") { try opened!.page(page) }
            let layers = try timed("render") { try InkRenderer.pdfLayers(drawing, width: geometry.width, height: geometry.height) }
            let source = timed("source") { InkSource.encode(drawing) }
            _ = try timed("increment") { try opened!.flattenIncrement(page: page, strokes: layers.strokes, texts: layers.texts, drawing: source) }
            timed("close") { opened = nil }
        }
        for (name, samples) in times.sorted(by: { $0.key < $1.key }) {
            let counted = Stats(Array(samples.dropFirst()))
            print("\(name): median \(format(counted.median * 1000, 2)) ms, min \(format(counted.sorted.first! * 1000, 2)), max \(format(counted.sorted.last! * 1000, 2))")
        }
    }
}
