import CanvasCore
import CanvasProtocol
import DocumentStore
import Foundation
import SystemPackage

/// The `.yianazip` reader, and the PDF reading and writing behind it: an input is the whole
/// file. It is read as `document.info` reads it, and the ink stored on its first page (by
/// earlier saves, or forged) is read back; a file that reads is flattened (a dot on its first
/// page), and must then read again with the same page count, its unknown metadata kept, its
/// markup count one more (saturating), and the dot as the last ink stored on the page. A file
/// that cannot be read must be refused with an error and left byte for byte as it was.
public enum YianazipTarget {
    public static func run(_ input: [UInt8]) {
        let folder = FuzzFolder.shared
        folder.reset()
        let path = folder.path + "/input.yianazip"
        _ = FileManager.default.createFile(atPath: path, contents: Data(input))
        guard let store = try? DocumentStore(folder: URL(fileURLWithPath: folder.path), keepRevisions: 2) else {
            fatalError("the document folder could not be opened")
        }
        let info: DocumentInfo
        do {
            info = try store.info("input.yianazip")
        } catch {
            if FileManager.default.contents(atPath: path).map(Array.init) != input { fatalError("a refused file was changed") }
            return
        }
        guard info.summary.pageCount > 0, let page = info.pages.first else { return }
        // Whatever ink the file claims to hold is read as an error or a drawing, never a trap.
        _ = try? Flattener.storedDrawing(location(path), page: 0)
        let dot = try! Stroke(tool: .pen, color: try! InkColor("red"), width: 2,
                              points: [try! InkPoint(x: page.width / 2, y: page.height / 2)])
        do {
            _ = try store.flatten("input.yianazip", page: 0, drawing: Drawing(strokes: [dot]))
        } catch {
            // Refusing is allowed (a page qpdf cannot rewrite); changing the file while refusing is not.
            if FileManager.default.contents(atPath: path).map(Array.init) != input { fatalError("a failed save changed the file: \(error)") }
            return
        }
        guard let after = try? store.info("input.yianazip") else { fatalError("a saved document no longer reads") }
        if after.summary.pageCount != info.summary.pageCount { fatalError("the page count changed") }
        for (key, value) in info.metadata ?? [:] where !["modified", "page_count", "markup"].contains(key) {
            if after.metadata?[key] != value { fatalError("metadata field \(key) was not kept") }
        }
        if after.metadata?["markup"]?["markup_count"] != .integer(YianaContainer.nextCount(info.metadata?["markup"]?["markup_count"])) {
            fatalError("the markup count is not one more than it was")
        }
        guard let stored = try? Flattener.storedDrawing(location(path), page: 0), let last = stored.strokes.last?.points.first,
              abs(last.x - page.width / 2) < 0.01, abs(last.y - page.height / 2) < 0.01 else {
            fatalError("the dot is not the last ink stored on the page")
        }
    }

    /// Where the PDF of the container at `path` starts.
    private static func location(_ path: String) -> PDFLocation {
        guard let file = try? FileDescriptor.open(FilePath(path), .readOnly) else { return PDFLocation(path: path) }
        defer { try? file.close() }
        return PDFLocation(path: path, offset: (try? YianaContainer.readHeader(file))?.pdfOffset ?? 0)
    }
}
