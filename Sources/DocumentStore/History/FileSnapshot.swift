import SystemPackage

/// A file as the history saw it: which file it was and when it last changed. Any write to a
/// file changes its modification time, and anything that sets that back (`touch -d`) changes
/// its change time, which nothing but the kernel sets: two snapshots that are equal are the
/// same bytes, as far as anything short of reading them can tell.
struct FileSnapshot: Codable, Equatable, Hashable, Sendable {
    var device: UInt64
    var inode: UInt64
    var size: Int64
    /// Nanoseconds since 1970.
    var modified: Int64
    var changed: Int64

    init(_ stat: Stat) {
        device = UInt64(stat.rawValue.st_dev)
        inode = UInt64(stat.rawValue.st_ino)
        size = stat.size
        modified = Int64(stat.rawValue.st_mtim.tv_sec) * 1_000_000_000 + Int64(stat.rawValue.st_mtim.tv_nsec)
        changed = Int64(stat.rawValue.st_ctim.tv_sec) * 1_000_000_000 + Int64(stat.rawValue.st_ctim.tv_nsec)
    }

    var identity: FileIdentity { FileIdentity(device: device, inode: inode) }

    /// Whether this is `written`, the same file as a save left it, told after that save renamed
    /// it into place: a rename changes a file's change time, never its size or modification
    /// time, and another program's write changes those.
    func isStill(_ written: FileSnapshot) -> Bool {
        identity == written.identity && size == written.size && modified == written.modified
    }
}
