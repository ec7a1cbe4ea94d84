import SystemPackage

/// A file as the history saw it: which file it was and when it last changed. Any write to a
/// file changes its modification time, and anything that sets that back (`touch -d`) changes
/// its change time, which nothing but the kernel sets: two snapshots that are equal are the
/// same bytes, as far as anything short of reading them can tell.
///
/// The device is kept but not compared: two machines' mounts of one network file system (two
/// FUSE mounts of a GlusterFS volume) give one file two device numbers and one inode number, so
/// a snapshot one instance recorded would never be the file another instance sees, and every
/// save through the other instance would take the document for another program's change.
struct FileSnapshot: Codable, Hashable, Sendable {
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

    static func == (a: FileSnapshot, b: FileSnapshot) -> Bool {
        (a.inode, a.size, a.modified, a.changed) == (b.inode, b.size, b.modified, b.changed)
    }

    func hash(into hasher: inout Hasher) {
        hasher.combine(inode)
        hasher.combine(size)
        hasher.combine(modified)
        hasher.combine(changed)
    }

    /// Whether `stat` is this file (its inode: the device is not compared, as for `==`).
    func isFile(_ stat: Stat) -> Bool { inode == UInt64(stat.rawValue.st_ino) }

    /// Whether this is `written`, the same file as a save left it, told after that save renamed
    /// it into place: a rename changes a file's change time, never its size or modification
    /// time, and another program's write changes those.
    func isStill(_ written: FileSnapshot) -> Bool {
        inode == written.inode && size == written.size && modified == written.modified
    }
}
