import CanvasCore
import DocumentStore
import Foundation
import PDFSurgery
import TestSupport
import Testing

/// Opening a document counts a page tree's plain leaves from their bytes rather than parsing
/// each one; these check that pages are still numbered exactly as qpdf's own walk numbers them,
/// on the corpus and on trees made to trip a reading of bytes.
@Suite("Page numbering")
struct PageNumberingTests {
    /// The object of each page, in order, as the qpdf command line lists them ("N G").
    static func qpdfPages(_ url: URL) throws -> [String]? {
        let listed = try run("/usr/bin/qpdf", ["--show-pages", url.path])
        guard listed.status == 0 || listed.status == 3 else { return nil }
        return listed.output.split(separator: "\n").compactMap { line in
            guard line.hasPrefix("page "), let colon = line.firstIndex(of: ":") else { return nil }
            return line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces).replacingOccurrences(of: " R", with: "")
        }
    }

    /// The object an appended update replaces to put ink on `page` ("N G"), or nil when the
    /// document is rewritten whole instead.
    static func inkedObject(_ url: URL, page: Int) throws -> String? {
        let drawing = Drawing(strokes: [try dot(20, 20)])
        let prepared = try Flattener.prepare(PDFLocation(path: url.path), page: page, adding: drawing)
        guard !prepared.needsRewrite else { return nil }
        let increment = String(decoding: try prepared.increment().prefix(40), as: UTF8.self)
        let header = increment.split(separator: "\n").first { $0.hasSuffix(" obj") } ?? ""
        return String(header.dropLast(4))
    }

    /// Checks the page count and the first, middle and last pages' objects against qpdf's.
    static func expectNumberedAsQPDF(_ url: URL, _ label: String) throws {
        guard let expected = try qpdfPages(url) else { return }
        let file: PDFFile
        do {
            file = try PDFFile(path: url.path)
        } catch {
            // Refused (damaged, encrypted): nothing is numbered.
            return
        }
        #expect(file.pageCount == expected.count, "\(label): \(file.pageCount) pages, qpdf lists \(expected.count)")
        guard file.pageCount == expected.count else { return }
        for page in Set([0, expected.count / 2, expected.count - 1]) {
            // A page qpdf counts but cannot place ink on (a kid that is no dictionary) is
            // refused as damaged, as it was before pages were counted from their bytes.
            let inked: String?
            do {
                inked = try inkedObject(url, page: page)
            } catch let error as FlattenError {
                guard case .pdf(let pdfError) = error, pdfError.kind == .damaged else { throw error }
                continue
            }
            if let object = inked {
                #expect(object == expected[page], "\(label): page \(page) is object \(object), qpdf's is \(expected[page])")
            }
        }
    }

    @Test("every corpus file's pages are the pages qpdf lists, in its order")
    func corpus() throws {
        let names = try FileManager.default.contentsOfDirectory(atPath: LiveCorpus.folder.path).filter { $0.hasSuffix(".pdf") }.sorted()
        for name in names { try Self.expectNumberedAsQPDF(LiveCorpus.folder.appendingPathComponent(name), name) }
    }

    /// A catalog, then a page tree of `nodes` (bodies for objects 2...), pages pointing at
    /// object 2 as their parent; every page has the same small content.
    static func tree(_ nodes: [String]) -> [UInt8] {
        PDFFixtures.assemble(["<< /Type /Catalog /Pages 2 0 R >>"] + nodes)
    }

    static func page(parent: Int = 2, extra: String = "") -> String {
        "<< /Type /Page /Parent \(parent) 0 R /MediaBox [0 0 200 200]\(extra) >>"
    }

    @Test("trees whose bytes could mislead a search are numbered as qpdf numbers them",
          arguments: Self.misleading.keys.sorted())
    func misleadingTrees(_ label: String) throws {
        let folder = try freshFolder("numbering")
        let url = folder.appendingPathComponent("tree.pdf")
        try Data(Self.misleading[label]!).write(to: url)
        try Self.expectNumberedAsQPDF(url, label)
    }

    static let misleading: [String: [UInt8]] = [
          // A kid that is a /Pages node, with a /Count that lies (2, for three pages).
          "a node among the kids, a lying /Count": tree([
              "<< /Type /Pages /Kids [3 0 R 4 0 R] /Count 2 >>", page(), "<< /Type /Pages /Parent 2 0 R /Kids [5 0 R 6 0 R] /Count 2 >>",
              page(parent: 4), page(parent: 4),
          ]),
          // "endobj" as a name before the node's /Kids.
          "a name /endobj before /Kids": tree([
              "<< /Type /Pages /Kids [3 0 R 4 0 R] /Count 3 >>", page(),
              "<< /Type /Pages /Parent 2 0 R /X /endobj /Kids [5 0 R 6 0 R] /Count 2 >>", page(parent: 4), page(parent: 4),
          ]),
          // /Kids written with a # escape.
          "/Kids written /K#69ds": tree([
              "<< /Type /Pages /Kids [3 0 R 4 0 R] /Count 3 >>", page(), "<< /Type /Pages /Parent 2 0 R /K#69ds [5 0 R 6 0 R] /Count 2 >>",
              page(parent: 4), page(parent: 4),
          ]),
          // "endobj" inside a string before /Kids.
          "a string holding endobj before /Kids": tree([
              "<< /Type /Pages /Kids [3 0 R 4 0 R] /Count 3 >>", page(), "<< /Type /Pages /Parent 2 0 R /T (x endobj) /Kids [5 0 R 6 0 R] /Count 2 >>",
              page(parent: 4), page(parent: 4),
          ]),
          // A comment holding endobj before /Kids.
          "a comment holding endobj before /Kids": tree([
              "<< /Type /Pages /Kids [3 0 R 4 0 R] /Count 3 >>", page(), "<< /Type /Pages /Parent 2 0 R % endobj\n/Kids [5 0 R 6 0 R] /Count 2 >>",
              page(parent: 4), page(parent: 4),
          ]),
          // A kid that is a reference to a node (its object's value is "5 0 R").
          "a kid whose value is a reference to a node": tree([
              "<< /Type /Pages /Kids [3 0 R 4 0 R] /Count 3 >>", page(), "5 0 R",
              "<< /Type /Pages /Parent 2 0 R /Kids [6 0 R 7 0 R] /Count 2 >>", page(parent: 5), page(parent: 5),
          ]),
          // The same page twice, a direct page, and a page without /Type: qpdf repairs these.
          "the same page twice": tree(["<< /Type /Pages /Kids [3 0 R 4 0 R 3 0 R] /Count 3 >>", page(), page()]),
          "a direct page": tree(["<< /Type /Pages /Kids [3 0 R << /Type /Page /Parent 2 0 R /MediaBox [0 0 9 9] >>] /Count 2 >>", page()]),
          "a page without /Type": tree(["<< /Type /Pages /Kids [3 0 R 4 0 R] /Count 2 >>", page(), "<< /Parent 2 0 R /MediaBox [0 0 200 200] >>"]),
          // A page whose dictionary holds a string, and one with a stream's keyword.
          "pages with strings and streams": tree([
              "<< /Type /Pages /Kids [3 0 R 4 0 R 5 0 R] /Count 3 >>", page(extra: " /T (a (nested) /Kids string)"),
              "<< /Length 0 >>\nstream\n\nendstream", page(),
          ]),
    ]

    @Test("pages in object streams, behind a cross-reference stream, are numbered as qpdf numbers them")
    func objectStreams() throws {
        let folder = try freshFolder("numbering")
        let plain = folder.appendingPathComponent("plain.pdf"), packed = folder.appendingPathComponent("packed.pdf")
        try Data(Self.tree([
            "<< /Type /Pages /Kids [3 0 R 4 0 R 7 0 R] /Count 4 >>", Self.page(), "<< /Type /Pages /Parent 2 0 R /Kids [5 0 R 6 0 R] /Count 2 >>",
            Self.page(parent: 4), Self.page(parent: 4), Self.page(),
        ])).write(to: plain)
        #expect(try run("/usr/bin/qpdf", ["--object-streams=generate", plain.path, packed.path]).status == 0)
        try Self.expectNumberedAsQPDF(packed, "object streams")
    }

    @Test("a page tree 1,000 levels deep is served; one deeper than 1,024 is refused as damaged")
    func depth() throws {
        func nested(_ levels: Int) -> [UInt8] {
            // Object 2 is the root node; node k + 1 is the only kid of node k; the page is last.
            var nodes: [String] = []
            for level in 0..<levels {
                let parent = level == 0 ? "" : " /Parent \(level + 1) 0 R"
                nodes.append("<< /Type /Pages\(parent) /Kids [\(level + 3) 0 R] /Count 1 >>")
            }
            nodes.append(Self.page(parent: levels + 1))
            return Self.tree(nodes)
        }
        let folder = try freshFolder("numbering")
        let served = folder.appendingPathComponent("served.pdf"), refused = folder.appendingPathComponent("refused.pdf")
        try Data(nested(1_000)).write(to: served)
        try Data(nested(1_100)).write(to: refused)
        #expect(try PDFFile(path: served.path).pageCount == 1)
        #expect(throws: PDFError.self) { try PDFFile(path: refused.path) }
        do {
            _ = try PDFFile(path: refused.path)
        } catch {
            #expect(error.kind == .damaged && error.message.contains("page tree"), "\(error)")
        }
    }
}
