import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The disk a folder takes, as `du -s` counts it: the allocated blocks of everything under it,
/// a file with several links counted once. What a history of revisions really costs.
public func diskUse(_ path: String) -> Int64 {
    var seen = Set<[UInt64]>()
    var total: Int64 = 0
    func visit(_ path: String) {
        var status = stat()
        guard lstat(path, &status) == 0 else { return }
        if seen.insert([UInt64(status.st_dev), UInt64(status.st_ino)]).inserted { total += Int64(status.st_blocks) * 512 }
        if status.st_mode & S_IFMT == S_IFDIR {
            for child in (try? FileManager.default.contentsOfDirectory(atPath: path)) ?? [] { visit(path + "/" + child) }
        }
    }
    visit(path)
    return total
}
