import Foundation
import PDFSurgery
import SystemPackage
import TestSupport
import Testing

/// A failure's errno travels in the record the failing call filled, not in a slot of the
/// thread: each error names its own call's cause, whatever ran before it or beside it.
@Suite("PDF errors per call")
struct PDFErrorTests {
    /// A one-page PDF, and a file that is not one, in a folder of their own.
    private static func files(_ name: String) throws -> (pdf: String, junk: String) {
        let folder = try freshFolder("pdf-errors-\(name)")
        let pdf = folder.appendingPathComponent("page.pdf").path, junk = folder.appendingPathComponent("junk.pdf").path
        try Data(PDFFixtures.pdf([PDFFixtures.Page(content: "0 0 m 100 100 l S")])).write(to: URL(fileURLWithPath: pdf))
        try Data("not a PDF at all\n".utf8).write(to: URL(fileURLWithPath: junk))
        return (pdf, junk)
    }

    /// A rewrite into a descriptor opened read-only: the write fails with EBADF.
    private static func failedWrite(_ pdf: String) -> PDFError? {
        do {
            let target = try FileDescriptor.open(FilePath(pdf), .readOnly)
            defer { try? target.close() }
            try PDFFile(path: pdf).flattenRewrite(page: 0, strokes: Array("0 0 m 10 10 l S".utf8), texts: [], drawing: Array("{}".utf8), to: target)
            return nil
        } catch let error as PDFError {
            return error
        } catch {
            return nil
        }
    }

    private static func damagedOpen(_ junk: String) -> PDFError? {
        do {
            _ = try PDFFile(path: junk)
            return nil
        } catch {
            return error
        }
    }

    @Test("a failed write says io and its errno; the next failure on the thread carries none of it")
    func errnoBelongsToItsCall() throws {
        let (pdf, junk) = try Self.files("sequence")
        let write = try #require(Self.failedWrite(pdf))
        #expect(write.kind == .io && write.errno == .badFileDescriptor, "\(write)")
        #expect(!write.message.isEmpty)
        let open = try #require(Self.damagedOpen(junk))
        #expect(open.kind == .damaged && open.errno == nil, "\(open)")
        #expect(!open.message.isEmpty)
    }

    @Test("failures on eight threads at once each name their own cause")
    func failuresSideBySide() async throws {
        let (pdf, junk) = try Self.files("threads")
        let wrong = await withTaskGroup(of: Int.self) { group in
            for lane in 0..<8 {
                group.addTask {
                    var wrong = 0
                    for round in 0..<25 {
                        if (lane + round) % 2 == 0 {
                            let error = Self.failedWrite(pdf)
                            if error?.kind != .io || error?.errno != .badFileDescriptor { wrong += 1 }
                        } else {
                            let error = Self.damagedOpen(junk)
                            if error?.kind != .damaged || error?.errno != nil { wrong += 1 }
                        }
                    }
                    return wrong
                }
            }
            return await group.reduce(0, +)
        }
        #expect(wrong == 0)
    }
}
