import Foundation
#if canImport(Glibc)
import Glibc
#endif
import SystemPackage

extension FileDescriptor {
    /// The bytes from `start` up to `end`, or up to the file's end if it is shorter now (a log
    /// is read up to where it was when its size was taken).
    func bytes(from start: Int64, to end: Int64) throws(Errno) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: Int(max(0, end - start)))
        var done = 0
        while done < bytes.count {
            let count = try read(at: start + Int64(done), into: &bytes[done...])
            if count == 0 { break }
            done += count
        }
        return Array(bytes[..<done])
    }

    private func read(at offset: Int64, into slice: inout ArraySlice<UInt8>) throws(Errno) -> Int {
        try Errno.rethrowing { try slice.withUnsafeMutableBytes { try read(fromAbsoluteOffset: offset, into: $0) } }
    }
}

extension Directory {
    /// Opens the existing file `name` for reading and writing, never following a link.
    func openForReadingAndWriting(_ name: String) throws(Errno) -> FileDescriptor {
        FileDescriptor(rawValue: try Self.check {
            openat(descriptor.rawValue, name, O_RDWR | O_NOFOLLOW | O_CLOEXEC)
        })
    }
}

extension UInt8 {
    var isASCIILetterOrDigit: Bool {
        (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(self) || (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(self)
            || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(self)
    }
}
