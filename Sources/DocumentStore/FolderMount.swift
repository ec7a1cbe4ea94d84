import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// What file system a document folder is on, and whether the history can be kept right on it
/// from several machines at once.
///
/// The history needs what each instance decides under the document's lock to be what is on the
/// server: the log's length and bytes, a file's size and times, which file a name holds. A
/// network file system's client may answer from its caches instead, for a second or more after
/// another machine changed the file, and then an instance reads a log without the other's last
/// records and hands out their numbers again (measured on GlusterFS: issue 46, and
/// docs/operations.md). GlusterFS can say how it is mounted (its `.meta` folder: the command
/// line and the active client graph), so a mount whose caches serve stale answers is refused at
/// start; other network file systems cannot be checked, and are only named in the log.
public struct FolderMount: Sendable, Equatable {
    /// The mount point and the file system type, as /proc/self/mountinfo gives them.
    public let mountPoint: String
    public let type: String
    /// Why several machines cannot share this folder safely; empty when nothing is known wrong.
    public let problems: [String]

    /// A file system whose files other machines may change: every decision is then read from
    /// the server (see the type's comment).
    public var isNetwork: Bool { Self.networkTypes.contains(type) || type.hasPrefix("fuse") }

    static let networkTypes: Set<String> = ["nfs", "nfs4", "ceph", "cifs", "smb3", "9p", "lustre", "gpfs", "glusterfs", "fuse.glusterfs"]

    /// The client translators that answer from a cache: with any of them loaded, an instance can
    /// read a file's size, its bytes or a name as they were before another machine's write.
    /// (write-behind is safe: the history flushes every write before it lets the lock go.)
    static let cachingTranslators = ["md-cache", "quick-read", "open-behind", "io-cache", "read-ahead", "readdir-ahead", "nl-cache"]

    /// The mount holding `path` (a folder), with what is known wrong with it; nil when
    /// /proc/self/mountinfo cannot be read.
    public static func of(_ path: String) -> FolderMount? {
        let resolved = URL(fileURLWithPath: path).standardizedFileURL.resolvingSymlinksInPath().path
        guard let table = text(atPath: "/proc/self/mountinfo", atMost: maxMountTableBytes) else { return nil }
        var best: (point: String, type: String)?
        for line in table.split(separator: "\n") {
            guard let entry = parse(line) else { continue }
            let inside = entry.point == "/" || resolved == entry.point || resolved.hasPrefix(entry.point + "/")
            // The last of equal mount points is the one on top.
            if inside, entry.point.count >= (best?.point.count ?? 0) { best = entry }
        }
        guard let best else { return nil }
        let problems = best.type == "fuse.glusterfs" ? glusterProblems(mountPoint: best.point) : []
        return FolderMount(mountPoint: best.point, type: best.type, problems: problems)
    }

    /// A mountinfo line's mount point (field 5, with `\040`-style escapes) and file system type
    /// (the first field after the lone `-`).
    static func parse(_ line: Substring) -> (point: String, type: String)? {
        let fields = line.split(separator: " ", omittingEmptySubsequences: false)
        guard fields.count > 6, let dash = fields.firstIndex(of: "-"), dash + 1 < fields.count else { return nil }
        return (unescape(fields[4]), String(fields[dash + 1]))
    }

    static func unescape(_ field: Substring) -> String {
        var bytes: [UInt8] = []
        var utf8 = Array(field.utf8)[...]
        while let first = utf8.first {
            if first == UInt8(ascii: "\\"), utf8.count >= 4,
               let code = UInt8(String(decoding: utf8.dropFirst().prefix(3), as: UTF8.self), radix: 8) {
                bytes.append(code)
                utf8 = utf8.dropFirst(4)
            } else {
                bytes.append(first)
                utf8 = utf8.dropFirst()
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// What is wrong with a GlusterFS mount, read from its `.meta` folder: the kernel's caches
    /// (entry and attribute timeouts other than 0, kept page caches) and the client graph's
    /// caching translators.
    static func glusterProblems(mountPoint: String) -> [String] {
        let meta = URL(fileURLWithPath: mountPoint).appendingPathComponent(".meta")
        // Served by the mount's own client process, which says what they hold: read only as far
        // as such files go, so that a client that answers with endless bytes (or a link to
        // /dev/zero in a folder mounted as GlusterFS) stops canvasd's start, not its memory.
        guard let command = text(atPath: meta.appendingPathComponent("cmdline").path, atMost: maxMetaBytes),
              let volfile = text(atPath: meta.appendingPathComponent("graphs/active/volfile").path, atMost: maxMetaBytes) else {
            return ["its .meta folder cannot be read (or holds more than \(maxMetaBytes >> 10) KiB a file), so how it caches cannot be checked"]
        }
        return glusterProblems(commandLine: command, volfile: volfile)
    }

    /// The most read of /proc/self/mountinfo (a machine with thousands of mounts has a few
    /// hundred KiB), and of a GlusterFS mount's command line or client graph (a few KiB).
    static let maxMountTableBytes = 16 << 20
    static let maxMetaBytes = 1 << 20

    /// The text of the file at `path`, read to its end; nil when it cannot be read or holds more
    /// than `limit` bytes. Read by chunks to the end, as /proc and FUSE files give no size.
    static func text(atPath path: String, atMost limit: Int) -> String? {
        let descriptor = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 64 << 10)
        while true {
            let count = chunk.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            if count < 0 && errno == EINTR { continue }
            guard count >= 0 else { return nil }
            if count == 0 { break }
            guard bytes.count + count <= limit else { return nil }
            bytes += chunk[0..<count]
        }
        return String(validating: bytes, as: UTF8.self)
    }

    static func glusterProblems(commandLine: String, volfile: String) -> [String] {
        var options: [String: String] = [:]
        for word in commandLine.split(whereSeparator: { $0 == " " || $0 == "\"" }) where word.hasPrefix("--") {
            let parts = word.dropFirst(2).split(separator: "=", maxSplits: 1)
            options[String(parts[0])] = parts.count > 1 ? String(parts[1]) : "yes"
        }
        var problems: [String] = []
        // GlusterFS's defaults: 1 s for names and attributes, 0 for names found missing.
        for (option, fallback) in [("entry-timeout", "1"), ("attribute-timeout", "1"), ("negative-timeout", "0")] {
            let value = options[option] ?? fallback
            if Double(value) != 0 { problems.append("mounted with \(option)=\(value) (the kernel keeps what it read for that long): mount with -o \(option)=0") }
        }
        for option in ["fopen-keep-cache", "kernel-writeback-cache"] {
            if let value = options[option], ["yes", "on", "true", "enable", "1"].contains(value.lowercased()) {
                problems.append("mounted with \(option) (the kernel keeps a file's pages across opens): mount without it")
            }
        }
        let loaded = Set(volfile.split(separator: "\n").compactMap { line -> String? in
            let words = line.split(separator: " ")
            guard words.count == 2, words[0] == "type", words[1].hasPrefix("performance/") else { return nil }
            return String(words[1].dropFirst("performance/".count))
        })
        let volume = options["volfile-id"].map { String($0.drop { $0 == "/" }) } ?? "VOLUME"
        for translator in cachingTranslators where loaded.contains(translator) {
            let option = translator == "md-cache" ? "stat-prefetch" : translator
            problems.append("its volume caches on the client (\(translator)): gluster volume set \(volume) performance.\(option) off")
        }
        return problems
    }
}
