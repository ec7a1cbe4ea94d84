#if canImport(Glibc)
import Glibc
#endif
import SystemPackage

/// An open directory, and every file operation the store makes, relative to it.
///
/// Names are resolved by the kernel against the descriptor this holds (`openat` and its
/// siblings), never by building a path and opening it later: a name checked is the name used,
/// and a link is never followed. The descriptor is closed when the last reference goes.
///
/// Sendable: the descriptor never changes, and the calls made on it are all thread-safe.
final class Directory: Sendable {
    let descriptor: FileDescriptor
    /// What messages call it.
    let path: String

    private init(_ descriptor: FileDescriptor, path: String) {
        self.descriptor = descriptor
        self.path = path
    }

    deinit { try? descriptor.close() }

    /// Opens the directory at `path` (following links: the folder itself may be one).
    static func open(_ path: String) throws(Errno) -> Directory {
        let fd = try check { Glibc.open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC) }
        return Directory(FileDescriptor(rawValue: fd), path: path)
    }

    /// The directory `name` inside this one, made first if `create` says so. A link is refused.
    func directory(_ name: String, create: Bool) throws(Errno) -> Directory {
        if create {
            do {
                _ = try Self.check { mkdirat(descriptor.rawValue, name, 0o755) }
            } catch where error == .fileExists {
                // Already there: whatever it is, the open below refuses anything but a directory.
            }
        }
        let fd = try Self.check { openat(descriptor.rawValue, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) }
        return Directory(FileDescriptor(rawValue: fd), path: path + "/" + name)
    }

    /// Opens the file `name` for reading. Never follows a link (`ELOOP` for one) and never waits
    /// (a FIFO opens at once); the caller checks what it got with `stat()` on the descriptor.
    func openForReading(_ name: String) throws(Errno) -> FileDescriptor {
        FileDescriptor(rawValue: try Self.check {
            openat(descriptor.rawValue, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
        })
    }

    /// Opens the existing file `name` for writing in place (never following a link); the caller
    /// checks with `stat()` that it is the file it means.
    func openForWriting(_ name: String) throws(Errno) -> FileDescriptor {
        FileDescriptor(rawValue: try Self.check {
            openat(descriptor.rawValue, name, O_WRONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
        })
    }

    /// Creates the file `name`, which must not exist yet, for writing (and reading back).
    func create(_ name: String, readable: Bool = false) throws(Errno) -> FileDescriptor {
        FileDescriptor(rawValue: try Self.check {
            openat(descriptor.rawValue, name, (readable ? O_RDWR : O_WRONLY) | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o644)
        })
    }

    /// What `name` is, without following a link; nil when there is nothing of that name.
    func stat(_ name: String) throws(Errno) -> Stat? {
        do {
            return try FilePath(name).stat(relativeTo: descriptor, flags: .symlinkNoFollow)
        } catch where error == .noSuchFileOrDirectory {
            return nil
        }
    }

    /// The names in the directory, `.` and `..` left out.
    func names() throws(Errno) -> [String] {
        // readdir takes over the descriptor it is given and moves its position. A duplicate
        // would share the position with every other listing of this directory under way on
        // another thread; opening "." again gives this listing a position of its own.
        let copy = try Self.check { openat(descriptor.rawValue, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC) }
        guard let stream = fdopendir(copy) else {
            let code = Glibc.errno
            Glibc.close(copy)
            throw Errno(rawValue: code)
        }
        defer { closedir(stream) }
        var names: [String] = []
        while let entry = readdir(stream) {
            // A name that is not UTF-8 cannot be written in a JSON request, so it is no
            // document; decoding it with replacement characters would list a name that opens
            // nothing.
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(validating: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            if let name, name != "." && name != ".." { names.append(name) }
        }
        return names
    }

    /// Gives the file `name` a second name, `newName` in `other`.
    func link(_ name: String, to other: Directory, as newName: String) throws(Errno) {
        _ = try Self.check { linkat(descriptor.rawValue, name, other.descriptor.rawValue, newName, 0) }
    }

    /// Moves `name` to `newName` in `other`, replacing what was there in one step.
    func rename(_ name: String, to other: Directory, as newName: String) throws(Errno) {
        _ = try Self.check { renameat(descriptor.rawValue, name, other.descriptor.rawValue, newName) }
    }

    /// Removes the file `name`; nothing of that name is not an error.
    func remove(_ name: String) throws(Errno) {
        do {
            _ = try Self.check { unlinkat(descriptor.rawValue, name, 0) }
        } catch where error == .noSuchFileOrDirectory {
        }
    }

    /// Makes the directory's entries durable (after a create, rename, link or unlink in it).
    func sync() throws(Errno) {
        _ = try Self.check { fsync(descriptor.rawValue) }
    }

    /// A system call's result, or its errno.
    @discardableResult
    static func check(_ call: () -> Int32) throws(Errno) -> Int32 {
        let result = call()
        guard result >= 0 else { throw Errno(rawValue: Glibc.errno) }
        return result
    }
}

/// An exclusive lock on an open file, held until `unlock()` or until the descriptor closes.
/// Kernel locks go with the process: one killed mid-save leaves none behind.
enum FileLock {
    /// Waits for the lock. A signal handled meanwhile is not a failure: the wait goes on.
    static func lock(_ file: FileDescriptor) throws(Errno) {
        while flock(file.rawValue, LOCK_EX) != 0 {
            guard Glibc.errno == EINTR else { throw Errno(rawValue: Glibc.errno) }
        }
    }

    /// Gives the lock up before the descriptor closes.
    static func unlock(_ file: FileDescriptor) {
        _ = flock(file.rawValue, LOCK_UN)
    }

    /// Takes the lock only if nobody holds it.
    static func tryLock(_ file: FileDescriptor) throws(Errno) -> Bool {
        guard flock(file.rawValue, LOCK_EX | LOCK_NB) == 0 else {
            if Glibc.errno == EWOULDBLOCK { return false }
            throw Errno(rawValue: Glibc.errno)
        }
        return true
    }
}

extension Stat {
    /// The file's identity: two names with the same one are the same file.
    var identity: FileIdentity { FileIdentity(device: UInt64(rawValue.st_dev), inode: UInt64(rawValue.st_ino)) }
    var isRegularFile: Bool { type == .regular }
}

struct FileIdentity: Hashable, Sendable {
    let device: UInt64
    let inode: UInt64
}
