import CanvasCore
@testable import DocumentStore
import Foundation
import PDFSurgery
import SystemPackage
import TestSupport
import Testing

/// Files made to mislead the reader: work that ran out of time must say so, not blame the file.
@Suite("Hostile files")
struct HostileFileTests {
    @Test("a read that runs past its budget is a timeout, even where qpdf turns the failed read into a missing object")
    func budgetSpentIsATimeout() throws {
        // The page's MediaBox is an object of its own, read only when the page is asked for:
        // qpdf catches the failed read of it and makes it null, which looked like a page
        // without a MediaBox ("damaged").
        let bytes = PDFFixtures.assemble([
            "<< /Type /Catalog /Pages 2 0 R >>",
            "<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
            "<< /Type /Page /Parent 2 0 R /MediaBox 4 0 R >>",
            "[0 0 612 792]",
        ])
        let folder = try freshFolder("budget")
        let path = folder.appendingPathComponent("late.pdf").path
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        let file = try FileDescriptor.open(FilePath(path), .readOnly)
        defer { try? file.close() }
        // Within its budget the page reads.
        #expect(try PDFFile(file: file, name: "late.pdf", budget: .seconds(60)).page(0).width == 612)
        let late = try PDFFile(file: file, name: "late.pdf", budget: .seconds(60))
        late.setBudget(.milliseconds(1))
        Thread.sleep(forTimeInterval: 0.02)
        #expect {
            _ = try late.page(0)
        } throws: { error in
            (error as? PDFError)?.kind == .timeout
        }
    }
}

@Suite("Files with a budget", .serialized)
struct FileBudgetTests {
    @Test("a document over maxDocumentBytes is listed as tooLarge and never read, hashed or saved")
    func tooLarge() throws {
        let folder = try freshFolder("toolarge")
        let small = PDFFixtures.pdf([.init(content: "0 g 10 10 50 50 re f")])
        let big = PDFFixtures.pdf([.init(content: "0 g 10 10 50 50 re f" + String(repeating: " ", count: 4000))])
        try Data(small).write(to: folder.appendingPathComponent("small.pdf"))
        try Data(big).write(to: folder.appendingPathComponent("big.pdf"))
        let store = try DocumentStore(folder: folder, maxDocumentBytes: Int64(small.count + 100))
        let listed = Dictionary(uniqueKeysWithValues: try store.list().map { ($0.name, $0.summary) })
        #expect((try? listed["small.pdf"]?.get())?.revision == 1)
        guard case .failure(.unreadable(_, let reason, let message))? = listed["big.pdf"] else {
            Issue.record("big.pdf listed as \(String(describing: listed["big.pdf"]))")
            return
        }
        #expect(reason == "tooLarge")
        #expect(message.contains("\(big.count) bytes"))
        let drawing = Drawing(strokes: [try dot(20, 50)])
        #expect(throws: DocumentError.self) { try store.flatten("big.pdf", page: 0, drawing: drawing) }
        #expect(throws: DocumentError.self) { try store.bytes("big.pdf", offset: 0, length: 10) }
        #expect(try Data(contentsOf: folder.appendingPathComponent("big.pdf")) == Data(big))
    }

    @Test("hashing past its budget is a timeout, not a read error, and the file is left as it was")
    func hashBudget() throws {
        let folder = try freshFolder("hashbudget")
        let bytes = PDFFixtures.pdf([.init(content: "0 g 10 10 50 50 re f")])
        try Data(bytes).write(to: folder.appendingPathComponent("d.pdf"))
        let store = try DocumentStore(folder: folder, hashBudget: .zero)
        #expect {
            _ = try store.summary("d.pdf")
        } throws: { error in
            guard case .unreadable(_, let reason, let message) = error as? DocumentError else { return false }
            return reason == "timeout" && message.contains("hashing")
        }
        #expect(try DocumentStore(folder: folder).summary("d.pdf").revision == 1)
    }
}
