import CanvasCore
import DocumentStore
import Foundation
import TestSupport
import Testing

@Suite("Documents in and out: bytes of revisions, uploads", .serialized)
struct TransferTests {
    static let pdf = PDFFixtures.pdf([.init(mediaBox: [0, 0, 300, 200], content: "0 g 10 10 50 50 re f")])

    /// An upload's spool holding `bytes`, as the parts of an upload leave it.
    func spool(_ bytes: [UInt8]) throws -> UploadSpool {
        let spool = try UploadSpool()
        try spool.write([bytes], at: 0)
        return spool
    }

    @Test("a spool takes parts of several frames at their offsets, hashes what it holds, and has no name in its folder")
    func spools() throws {
        let before = try FileManager.default.contentsOfDirectory(atPath: NSTemporaryDirectory()).filter { $0.hasPrefix("canvasd-upload-") }
        let spool = try UploadSpool()
        try spool.write([Array(Self.pdf[0..<10]), Array(Self.pdf[10..<25])], at: 0)
        try spool.write([Array(Self.pdf[25...])], at: 25)
        try spool.write([Array(Self.pdf[5..<30])], at: 5)   // a part sent again writes the same bytes
        #expect(try spool.sha256() == DocumentStore.sha256(Self.pdf))
        let after = try FileManager.default.contentsOfDirectory(atPath: NSTemporaryDirectory()).filter { $0.hasPrefix("canvasd-upload-") }
        #expect(after == before, "the spool's file is unlinked at once")
        let empty = try UploadSpool()
        #expect(try empty.sha256() == DocumentStore.sha256([]))
    }

    func names(_ folder: URL) throws -> [String] {
        try FileManager.default.subpathsOfDirectory(atPath: folder.path).sorted()
    }

    @Test("bytes of the current revision and of the original, in pieces, with their hashes")
    func bytes() throws {
        let folder = try freshFolder("bytes")
        try Data(Self.pdf).write(to: folder.appendingPathComponent("a.pdf"))
        let store = try DocumentStore(folder: folder)
        _ = try store.flatten("a.pdf", page: 0, drawing: Drawing(strokes: [dot(50, 50)]))
        let current = Array(try Data(contentsOf: folder.appendingPathComponent("a.pdf")))
        let whole = try store.bytes("a.pdf", offset: 0, length: 1 << 30)
        #expect(whole.revision == 2 && whole.bytes == current && whole.sha256 == DocumentStore.sha256(current))
        let original = try store.bytes("a.pdf", revision: 1, offset: 10, length: 20)
        #expect(original.bytes == Array(Self.pdf[10..<30]) && original.size == Int64(Self.pdf.count))
        #expect(original.sha256 == DocumentStore.sha256(Self.pdf))
        #expect(try store.bytes("a.pdf", offset: Int64(current.count) + 5, length: 10).bytes.isEmpty)
        #expect(throws: DocumentError.revisionNotFound(name: "a.pdf", revision: 3)) { try store.bytes("a.pdf", revision: 3, offset: 0, length: 1) }
    }

    @Test("an upload is checked before anything is stored")
    func refusals() throws {
        let folder = try freshFolder("refused")
        let store = try DocumentStore(folder: folder)
        #expect(try store.check(upload: spool(Self.pdf), as: "ok.pdf") == 1)
        let cases: [([UInt8], String, String)] = [
            (Array("hello".utf8), "x.pdf", "notPDF"),
            (Array(Self.pdf.prefix(Self.pdf.count / 2)), "x.pdf", "damagedOrEncrypted"),
            (Self.pdf, "x.yianazip", "container"),
            ([], "x.pdf", "empty"),
        ]
        for (bytes, name, reason) in cases {
            #expect { _ = try store.check(upload: spool(bytes), as: name) } throws: { Self.refusal($0) == reason || Self.refusal($0) == "damaged" && reason == "damagedOrEncrypted" }
        }
        // A password-protected PDF is refused as `encrypted`, a reason of its own in the spec.
        let aside = try freshFolder("refused-aside")
        let plain = aside.appendingPathComponent("plain.pdf"), locked = aside.appendingPathComponent("locked.pdf")
        try Data(Self.pdf).write(to: plain)
        #expect(try run("/usr/bin/qpdf", ["--encrypt", "user-secret", "owner-secret", "256", "--", plain.path, locked.path]).status == 0)
        #expect { _ = try store.check(upload: spool(Array(try Data(contentsOf: locked))), as: "x.pdf") } throws: { Self.refusal($0) == "encrypted" }
        #expect(try names(folder) == [".canvas-revisions"])
    }

    @Test("an upload whose read runs out of time is refused as a timeout, not as damaged")
    func readOutOfTime() throws {
        // A valid PDF of many pages: every page is read by the check, which takes far longer
        // than the small budget, and well within a large one.
        let pages = PDFFixtures.pdf(Array(repeating: .init(content: "0 g 10 10 50 50 re f"), count: 20_000))
        let folder = try freshFolder("refused-late")
        #expect(try DocumentStore(folder: folder, readBudget: .seconds(120)).check(upload: spool(pages), as: "long.pdf") == 20_000)
        let hurried = try DocumentStore(folder: folder, readBudget: .milliseconds(5))
        #expect {
            _ = try hurried.check(upload: spool(pages), as: "long.pdf")
        } throws: { error in
            guard case .refused(let name, let reason, let message)? = error as? DocumentError else { return false }
            return name == "long.pdf" && reason == "timeout" && message.contains("ms")
        }
        #expect(try names(folder) == [".canvas-revisions"])
    }

    static func refusal(_ error: any Error) -> String? {
        guard case .refused(_, let reason, _)? = error as? DocumentError else { return nil }
        return reason
    }

    @Test("a new document is linked in without replacing one; a revision goes through the atomic save")
    func store() throws {
        let folder = try freshFolder("upload")
        let store = try DocumentStore(folder: folder)
        let summary = try store.store(upload: spool(Self.pdf), as: "new.pdf", expectedRevision: nil)
        #expect(summary.revision == 1 && summary.sha256 == DocumentStore.sha256(Self.pdf))
        #expect(throws: DocumentError.alreadyExists(name: "new.pdf")) { try store.store(upload: spool(Self.pdf), as: "new.pdf", expectedRevision: nil) }
        let other = PDFFixtures.pdf([.init(mediaBox: [0, 0, 100, 100], content: ""), .init(mediaBox: [0, 0, 100, 100], content: "")])
        #expect(throws: DocumentError.conflict(name: "new.pdf", expected: 4, current: 1)) {
            try store.store(upload: spool(other), as: "new.pdf", expectedRevision: 4)
        }
        let next = try store.store(upload: spool(other), as: "new.pdf", expectedRevision: 1)
        #expect(next.revision == 2 && next.pageCount == 2)
        #expect(Array(try Data(contentsOf: folder.appendingPathComponent("new.pdf"))) == other)
        #expect(try store.bytes("new.pdf", revision: 1, offset: 0, length: 1 << 20).bytes == Self.pdf)
        #expect(try names(folder).filter { !$0.hasPrefix(".canvas-revisions") } == ["new.pdf"], "no temporary file is left")
        #expect(throws: DocumentError.self) { try store.store(upload: spool(Self.pdf), as: "../out.pdf", expectedRevision: nil) }
    }
    @Test("what an upload killed before its link left is removed when the folder is opened again, once no writer can own it")
    func abandonedUploads() throws {
        let folder = try freshFolder("abandoned-upload")
        let write = { (name: String, age: TimeInterval) in
            let url = folder.appendingPathComponent(name)
            try Data(Self.pdf).write(to: url)
            try FileManager.default.setAttributes([.modificationDate: Date(timeIntervalSinceNow: -age)], ofItemAtPath: url.path)
        }
        try write(".upload.4242.17", 2 * 3600)     // killed two hours ago
        try write(".upload.4243.18", 60)           // may still be written by another instance
        try write(".uploaded-by-hand", 2 * 3600)   // not an upload's: not ours to remove
        try write("kept.pdf", 2 * 3600)
        _ = try DocumentStore(folder: folder)
        #expect(try names(folder).filter { !$0.hasPrefix(".canvas-revisions") } == [".upload.4243.18", ".uploaded-by-hand", "kept.pdf"])
    }
}
