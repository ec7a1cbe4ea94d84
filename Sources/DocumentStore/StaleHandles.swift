#if canImport(Glibc)
import Glibc
#endif

extension DocumentStore {
    /// How often an operation starts again when files keep being replaced under it.
    static let staleAttempts = 6

    /// Runs `body`, and again from the start when it failed on a file another machine replaced
    /// or removed while this one held it open (ESTALE, `DocumentError.isStale`). On a network
    /// file system a reader that opens the log while another instance's compaction renames a
    /// new one over it, or the document while a save renames the new revision over it, holds a
    /// handle the server no longer knows; the kernel retries a lookup that fails so, but not a
    /// `fstat` or a `read` on a descriptor already open. Opened again by name, the file is the
    /// new one. `body` must open everything it reads by name, and leave nothing behind when it
    /// fails (reads; a save, which a failure undoes).
    func againWhenStale<T>(_ body: () throws(DocumentError) -> T) throws(DocumentError) -> T {
        var attempt = 0
        while true {
            do throws(DocumentError) {
                return try body()
            } catch {
                guard error.isStale, attempt < Self.staleAttempts - 1 else { throw error }
                attempt += 1
                // 2 to 32 ms: the replacing instance's rename and its next steps take about that.
                usleep(UInt32(1_000 << attempt))
            }
        }
    }
}
