public import CanvasProtocol
public import Foundation
public import SystemPackage
#if canImport(Glibc)
import Glibc
#endif

/// Why a document operation failed. Each case says what a client did wrong or what went wrong
/// underneath, with the native cause.
public enum DocumentError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The name is not a plain `.pdf` or `.yianazip` file name inside the folder.
    case invalidName(String, reason: String)
    case notFound(String)
    case pageOutOfRange(name: String, page: Int, pageCount: Int)
    case revisionNotFound(name: String, revision: Int)
    /// The page would hold more ink than `limit` points, with what earlier saves put there.
    case inkLimit(name: String, page: Int, stored: Int, adding: Int, limit: Int)
    /// `expectedRevision` is not the current one: someone else saved first.
    case conflict(name: String, expected: Int, current: Int)
    /// A reopened drawing's save found the ink it was to replace no longer on the page.
    case inkChanged(name: String, page: Int)
    /// A new document (an upload without `expectedRevision`) under a name already taken.
    case alreadyExists(name: String)
    /// An upload that is not a document the store can serve (damaged, encrypted, not a PDF,
    /// not the bytes announced); nothing was stored.
    case refused(name: String, reason: String, message: String)
    /// A save its fence stopped (`DocumentStore.WriteFence`): `reason` says why ("sessionMoved":
    /// the session it was for is another instance's now; "sessionStore": the store could not be
    /// asked). Nothing was written.
    case fenced(name: String, reason: String, message: String)
    /// The file is damaged or encrypted, or its container is malformed.
    case unreadable(name: String, reason: String, message: String)
    /// A write or file-system call failed: the operation, the cause's text, and the errno when
    /// a system call gave one.
    case io(operation: String, message: String, errno: Errno? = nil)

    /// A save that found the document written by another program while it ran: it saved nothing,
    /// and the next try keeps that change as a revision first.
    static func changedDuringSave(_ name: String) -> DocumentError {
        .unreadable(name: name, reason: "busy", message: "another program changed it during the save; nothing was saved, try again")
    }

    /// A failed system call, with its errno.
    static func system(_ operation: String, _ error: Errno) -> DocumentError {
        .io(operation: operation, message: String(cString: strerror(error.rawValue)), errno: error)
    }

    public var description: String {
        switch self {
        case .invalidName(let name, let reason): return "\(name.debugDescription) is not a document name: \(reason)"
        case .notFound(let name): return "no document \(name.debugDescription)"
        case .pageOutOfRange(let name, let page, let count):
            return "\(name) has \(count) pages (numbered from 0); there is no page \(page)"
        case .revisionNotFound(let name, let revision): return "\(name) has no revision \(revision): pruned, or never made"
        case .conflict(let name, let expected, let current):
            // A revision past the current one was never made: "saved since" would send a client
            // looking for a writer that does not exist.
            return expected < current ? "\(name) is at revision \(current), not \(expected): it was saved since"
                : "\(name) is at revision \(current); there is no revision \(expected) yet"
        case .inkChanged(let name, let page):
            return "the ink reopened from page \(page) of \(name) is no longer on it (saved over since, restored, or replaced); cancel, or reopen the page"
        case .refused(let name, _, let message): return "\(name) refused: \(message)"
        case .fenced(let name, _, let message): return "\(name) not saved: \(message)"
        case .alreadyExists(let name): return "\(name) already exists; give expectedRevision to upload a new revision of it"
        case .unreadable(let name, _, let message): return "\(name) cannot be read: \(message)"
        case .inkLimit(let name, let page, let stored, let adding, let limit):
            return "page \(page) of \(name) has \(stored) points of ink; \(adding) more would pass the limit of \(limit) a page"
        case .io(let operation, let message, _): return "\(operation): \(message)"
        }
    }

    /// The process or the system ran out of open files: a passing state (another client's
    /// connections, a burst of work), not a fault of the document or of canvasd's code.
    public var isOutOfDescriptors: Bool {
        guard case .io(_, _, let code?) = self else { return false }
        return code == .tooManyOpenFiles || code == .tooManyOpenFilesInSystem
    }

    /// A file that another machine replaced or removed while this one held it open, on a
    /// network file system (ESTALE: GlusterFS, NFS): opened again by name, it is there.
    var isStale: Bool {
        guard case .io(_, _, let code?) = self else { return false }
        return code == .staleNFSFileHandle
    }

    /// A write that failed for want of room (a full disk, a quota, a file-size limit): the
    /// client can try again once space is made, so it is not an internal fault.
    public var isOutOfSpace: Bool {
        guard case .io(_, _, let code?) = self else { return false }
        return [.noSpace, .diskQuotaExceeded, .fileTooLarge].contains(code)
    }
}

public struct PageSummary: Sendable, Equatable {
    public let width: Double
    public let height: Double
    public let rotation: Int
}

public struct DocumentInfo: Sendable {
    public let summary: DocumentSummary
    public let pages: [PageSummary]
    /// A .yianazip document's metadata; nil for a .pdf.
    public let metadata: [String: JSONValue]?
}

public struct DocumentSummary: Sendable, Equatable {
    public let name: String
    public let revision: Int
    public let pageCount: Int
    /// SHA-256 of the document file's bytes (lowercase hex): what a viewer compares to know
    /// whether what it shows is current.
    public let sha256: String
    /// The answer to a save run again with its key: the revision its first run made, found, not
    /// made now (so no `document.saved` announces it again). How the answer came, not what it
    /// names: two summaries of one revision are equal whatever this says.
    public internal(set) var madeBefore = false
    /// When the revision was committed (milliseconds since 1970, from its record in the log),
    /// for a summary of a save; nil for a summary read back. With the name, the number and the
    /// sha256 it tells two saves apart that a history started again (its folder removed) would
    /// otherwise share: the document feed's mark is made of it.
    public internal(set) var savedAt: Int64?

    public static func == (a: DocumentSummary, b: DocumentSummary) -> Bool {
        (a.name, a.revision, a.pageCount, a.sha256) == (b.name, b.revision, b.pageCount, b.sha256)
    }
}

public struct RevisionSummary: Sendable, Equatable {
    public let revision: Int
    public let bytes: Int64
    public let modified: Date
    public let current: Bool
    public let sha256: String
}

