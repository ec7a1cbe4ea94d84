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
