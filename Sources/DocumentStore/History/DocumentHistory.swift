import Foundation
#if canImport(Glibc)
import Glibc
#endif
import SystemPackage

/// How the store reads and writes a document's history (`RevisionHistory`, `HistoryLog`).
///
/// The document file is the revision the log last saw it as, exactly when its identity (device,
/// inode, size, modification and change times) is the one the log recorded. Anything else is a
/// change no save of the store made: another program wrote the file in place, renamed another
/// over it, appended to it or cut it, or a save of the store was killed half-way. The next
/// holder of the document's lock settles it (`settle`): it finishes or abandons the killed
/// save, and keeps a file with new bytes as the next revision (copied into the history, with
/// its real sha256), or notes that a file with the current revision's bytes is still that
/// revision. Readers settle too when no writer holds the lock; while one does, they wait for it.
extension DocumentStore {
    /// What a document's history folder holds.
    enum Seen {
        /// No history: the document has never been saved (it is revision 1, as it is).
        case none
        /// A history of an older layout, which the first holder of the lock migrates.
        case legacy
        case log(HistoryState)
    }

    /// The document's revision history; nil when there is none (nothing kept yet), or when
    /// something that is not a directory stands where it belongs (readers read on, revision 1
    /// then, and a save refuses with that cause until it is moved away).
    func history(_ name: String, create: Bool) throws(DocumentError) -> RevisionHistory? {
        do {
            // `.canvas-revisions` opened again each time: removed by hand while canvasd runs, it
            // is made again by the next save instead of failing every save until a restart.
            let revisions = try root.directory(Self.revisionsFolderName, create: create)
            return RevisionHistory(directory: try revisions.directory(name, create: create), name: name)
        } catch .noSuchFileOrDirectory where !create {
            return nil
        } catch .notDirectory {
            // Something else where the history's folder should be: its revisions are not
            // reachable, and the document is not its revision 1 (nor may a save start another).
            throw .unreadable(name: name, reason: "damaged",
                              message: "its history (\(Self.revisionsFolderName)/\(name)) is not a folder; its kept revisions cannot be reached (move it away to start a new history)")
        } catch {
            throw .system("open the revisions of \(name)", error)
        }
    }

    func seen(_ history: RevisionHistory?) throws(DocumentError) -> Seen {
        guard let history else { return .none }
        if let state = try history.read(histories) { return .log(state) }
        if try history.lostItsLog() { throw RevisionHistory.logLost(history.name) }
        return history.hasLegacyFiles() ? .legacy : .none
    }

    /// Takes the document's lock, as its one writer: with `wait` false, nil when another holds it.
    func writer(_ name: String, _ history: RevisionHistory, wait: Bool) throws(DocumentError) -> HistoryWriter? {
        let folderChanged = (try? history.directory.descriptor.stat())?.rawValue.st_mtim ?? timespec()
        return try HistoryWriter(history, wait: wait, cache: writtenHistories) { [self] in
            let document = try? openDocument(name)
            return try LegacyHistory.migrate(history, document: document, folderChanged: folderChanged) { (length) throws(DocumentError) in
                guard let document else { return nil }
                return try cut(name, document, to: length)
            }
        }
    }

    /// Reads the current document with `body`, and names the revision of what it read. Takes no
    /// lock: what it read is the revision whose identity the file had throughout the read. A
    /// file the history has not seen (changed by another program, or by a save under way) is
    /// settled first, under the lock, when no writer holds it; while one does, the read waits
    /// for it. With `hashing` false, a document no save has touched is not hashed (its sha256 is
    /// then empty): for callers that want only its number.
    func reading<T>(_ name: String, hashing: Bool = true, _ body: (OpenFile) throws(DocumentError) -> T) throws(DocumentError)
        -> (T, revision: Int, sha256: String, kept: [KeptRevision]) {
        try againWhenStale { () throws(DocumentError) in try readingOnce(name, hashing: hashing, body) }
    }

    private func readingOnce<T>(_ name: String, hashing: Bool, _ body: (OpenFile) throws(DocumentError) -> T) throws(DocumentError)
        -> (T, revision: Int, sha256: String, kept: [KeptRevision]) {
        for attempt in 0..<Self.readAttempts {
            let file = try openDocument(name)
            let outcome: Result<T, DocumentError>
            do {
                outcome = .success(try body(file))
            } catch {
                outcome = .failure(error)
            }
            // Written while it was read (an append, another program): read it again.
            guard let after = try? file.descriptor.stat(), FileSnapshot(after) == FileSnapshot(file.stat) else { continue }
            let history = try history(name, create: false)
            let last = attempt == Self.readAttempts - 1
            let seen = try seen(history)
            switch seen {
            case .none:
                return (try outcome.get(), 1, hashing ? try hash(file, name) : "", [])
            case .log(let state) where state.revisions.isEmpty && state.next == 1:
                // A first save that failed before it kept anything (a full disk) left an empty
                // log: the document is still revision 1, as it is, and a read keeps nothing.
                return (try outcome.get(), 1, hashing ? try hash(file, name) : "", [])
            case .log(let state):
                // The record is believed once the bytes are seen to hash to it; one that does not
                // hold makes the file a change the history has not seen, settled below.
                if let revision = state.revision(of: FileSnapshot(file.stat)), try holds(name, file, revision) {
                    let (number, sha256) = (revision.revision, revision.sha256)
                    return (try outcome.get(), number, sha256, state.kept)
                }
                // No number is named for a file no revision is yet (an empty file, one changed
                // again and again, one a writer holds throughout): a number named is handed out.
                if file.stat.size == 0 {
                    throw .unreadable(name: name, reason: "damaged", message: "it is empty (being written by another program?)")
                }
            case .legacy:
                break
            }
            if last { break }
            if try !(history.map { (history) throws(DocumentError) in try settleIfIdle(name, history) } ?? false) {
                // A writer is at work: its save, or its settling, takes a few milliseconds.
                usleep(5_000)
            }
        }
        throw .unreadable(name: name, reason: "busy", message: "it was saved or changed over and over while being read; try again")
    }

    /// Settles the document when nobody holds its lock; false when somebody does. A reader
    /// leaves files for a writer to remove (`cleaning`); start-up removes them itself.
    func settleIfIdle(_ name: String, _ history: RevisionHistory, cleaning: Bool = false) throws(DocumentError) -> Bool {
        guard let writer = try writer(name, history, wait: false) else { return false }
        defer { writer.close() }
        _ = try settle(name, writer, cleaning: cleaning)
        return true
    }

    /// The history of a document that is not in the folder (deleted), settled; nil when it has
    /// none.
    /// The history of `name` when `error` says there is no document there now: deleted, or
    /// something that is no plain file at its name (a folder, a FIFO, a link). Its kept revisions
    /// are served as they are kept; nil for any other failure, or no history.
    func historyWithoutDocument(_ name: String, after error: DocumentError) throws(DocumentError) -> HistoryState? {
        switch error {
        case .notFound(let missing) where missing == name: return try historyWithoutDocument(name)
        case .unreadable(let named, "notRegularFile", _) where named == name: return try historyWithoutDocument(name)
        default: return nil
        }
    }

    func historyWithoutDocument(_ name: String) throws(DocumentError) -> HistoryState? {
        guard let history = try history(name, create: false) else { return nil }
        switch try seen(history) {
        case .none: return nil
        case .log(let state) where state.pending == nil: return state
        case .log, .legacy:
            guard let writer = try writer(name, history, wait: true) else { return nil }
            defer { writer.close() }
            _ = try settle(name, writer)
            return writer.state
        }
    }

    /// Under the lock: puts right what a killed save left, removes what no kept revision needs,
    /// and makes the document file a revision (see the type's comment). Returns the document
    /// file, open, or nil when there is none. Only a writer (`cleaning`) removes or cuts files
    /// of the history; a reader settling leaves them for it.
    func settle(_ name: String, _ writer: HistoryWriter, cleaning: Bool = true) throws(DocumentError) -> OpenFile? {
        let history = writer.history
        // Lines a save under way announced it would write past what the log accounts for: their
        // tails are that save's, which the steps below may end before the files are looked at.
        let announced = Set([writer.state.extending?.line, writer.state.intent?.line].compactMap { $0 })
        // Nothing under way when the lock was taken: no save left a step to finish or undo.
        let quiet = writer.state.pending == nil && writer.state.intent == nil && writer.state.extending == nil
        do {
            // A replacing save committed, then killed before or after its rename.
            if let pending = writer.state.pending, let temporary = pending.temporary, let made = pending.document {
                let number = pending.revision
                let now = try root.stat(name)
                let left = try history.directory.stat(temporary)
                if let now, FileSnapshot(now).isStill(made) {
                    try writer.append([.identity(number, document: FileSnapshot(now))], durable: false)
                } else if let left, made.isFile(left),
                          now == nil || writer.state.current?.document == FileSnapshot(now!) {
                    // Killed before its rename, and nothing else has changed the document since:
                    // the save is committed, so it is finished.
                    try place(temporary, history, as: name, replacing: now != nil)
                    if let placed = try root.stat(name), FileSnapshot(placed).isStill(made) {
                        try writer.append([.identity(number, document: FileSnapshot(placed))], durable: false)
                    }
                } else if left.map(made.isFile) == true || now.map({ writer.state.current?.document == FileSnapshot($0) }) == true {
                    // Killed before its rename: another program wrote the document since, or the
                    // new file is gone and the document is still the revision before. The save
                    // never became the document (its client had no answer); any other program's
                    // file is the next revision.
                    try writer.append([.abandoned(number)], durable: true)
                } else {
                    // Renamed into place (its temporary is gone), then written or replaced by
                    // another program: the revision was the file as the save made it, and stays
                    // kept in its line; what the name holds now is the next revision.
                    try writer.append([.identity(number, document: made)], durable: true)
                }
            }
            // An append in place killed before its commit: its bytes are cut off the document,
            // once the bytes before them are checked to be the revision it appended to (another
            // program may have written the file since: then it is that program's, kept below).
            if let intent = writer.state.intent {
                let (number, from, before) = (intent.revision, intent.from, intent.document)
                if let now = try root.stat(name), before.isFile(now), now.size > from,
                   let appendedTo = writer.state.current.flatMap({ writer.state.revisions[$0.revision] }), appendedTo.length == from {
                    let file = try root.openForReadingAndWriting(name)
                    defer { try? file.close() }
                    if before.isFile(try Errno.rethrowing { try file.stat() }),
                       try SHA256Hasher.prefixDigests(file, lengths: [from])[from]?.0 == appendedTo.sha256 {
                        try Directory.check { ftruncate(file.rawValue, off_t(from)) }
                        try Directory.check { fsync(file.rawValue) }
                    }
                }
                try writer.append([.abandoned(number)], durable: false)
            }
            // Whatever else is in the folder: a killed save's files and tails, the files of
            // revisions pruned, an older layout's files once migrated, anything put there by hand.
            // Not looked for when nothing was under way and the folder and the log are as this
            // process's last save left them (`SettledFolders`).
            if quiet && settledFolders.unchanged(writer) { return try settleDocument(name, writer) }
            settledFolders.forget(history.directory.path)
            let needed = writer.state.neededLines
            var seals: [HistoryRecord] = []
            func lost() -> DocumentError {
                .unreadable(name: name, reason: "damaged",
                            message: "its history holds bytes past every revision its log accounts for (the log lost records, cut or replaced by hand): nothing is changed; move .canvas-revisions/\(name) away to start a new history")
            }
            let state = writer.state
            for file in try history.directory.names() where file != HistoryLog.fileName && file != RevisionHistory.lockName {
                if let line = RevisionHistory.line(ofFile: file) {
                    // A line numbered past any the log handed out, or longer than any record
                    // made it with no save announced on it: bytes of revisions the log lost,
                    // which nobody may remove, cut or number again.
                    guard line <= state.next else { throw lost() }
                    guard let stat = try history.directory.stat(file), stat.isRegularFile else { continue }
                    let announced = announced.contains(line)
                    if let length = needed[line] {
                        guard stat.size <= length || stat.size <= (state.written[line] ?? 0) || announced else { throw lost() }
                        if cleaning, stat.size > length, let snapshot = try shorten(file, history, to: length) {
                            seals.append(.seal(line, snapshot))
                        }
                        continue
                    }
                    guard line == state.next || state.written[line] != nil || announced else { throw lost() }
                }
                guard cleaning else { continue }
                // A directory put there by hand is left alone (a file of ours is never one).
                if let stat = try history.directory.stat(file), stat.type == .directory { continue }
                try history.directory.remove(file)
            }
            if !seals.isEmpty { try writer.append(seals, durable: false) }
            seals = []
            // A line's file that is not as the log last saw it (a hard link of an older layout's
            // removed above changes its change time; so does a hand's edit): sealed again once
            // every kept revision in it is read and found to be its bytes.
            for (line, _) in needed {
                let file = RevisionHistory.lineName(line)
                guard let stat = try history.directory.stat(file), FileSnapshot(stat) != writer.state.lines[line] else { continue }
                let revisions = writer.state.kept.filter { $0.line == line }
                let opened = try history.directory.openForReading(file)
                defer { try? opened.close() }
                let digests = try SHA256Hasher.prefixDigests(opened, lengths: revisions.compactMap { $0.length }.filter { $0 <= stat.size })
                if revisions.allSatisfy({ digests[$0.length]?.0 == $0.sha256 }),
                   FileSnapshot(try Errno.rethrowing { try opened.stat() }) == FileSnapshot(stat) {
                    seals.append(.seal(line, FileSnapshot(stat)))
                }
            }
            if !seals.isEmpty { try writer.append(seals, durable: false) }
        } catch let error as Errno {
            throw .system("repair the revisions of \(name)", error)
        } catch let error as DocumentError {
            throw error
        } catch {
            throw .io(operation: "repair the revisions of \(name)", message: "\(error)")
        }
        return try settleDocument(name, writer)
    }

    /// The last step of `settle`: the document file made a revision, if it is none yet.
    private func settleDocument(_ name: String, _ writer: HistoryWriter) throws(DocumentError) -> OpenFile? {
        let file: OpenFile
        do {
            file = try openDocument(name)
        } catch .notFound {
            return nil
        }
        let snapshot = FileSnapshot(file.stat)
        if let claimed = writer.state.revision(of: snapshot), try holds(name, file, claimed) { return file }
        // No revision is an empty file: it is no PDF, and most likely one being written.
        guard file.stat.size > 0 else { return file }
        let (sha256, midstate, fed) = try hashWithState(file, name)
        writer.keptCost.bytesHashed += fed
        if let current = writer.state.current, writer.state.revisions[current.revision]?.sha256 == sha256 {
            try writer.append([.identity(current.revision, document: snapshot)], durable: false)
            vouched.vouch(name, snapshot, length: file.stat.size, sha256: sha256)
            return file
        }
        try keep(name, file, sha256: sha256, midstate: midstate, writer, source: writer.state.revisions.isEmpty ? "original" : "outside")
        // Another program's change is a revision like a save's, and kept by the same rules: a
        // document only ever changed from outside would otherwise keep every one of them.
        prune(writer)
        return file
    }

    /// Keeps the document file's bytes as the next revision, in a line of its own: a copy only
    /// canvasd writes, made durable and named in the log before anything depends on it.
    func keep(_ name: String, _ file: OpenFile, sha256: String, midstate: SHA256Midstate, _ writer: HistoryWriter, source: String) throws(DocumentError) {
        let history = writer.history
        let number = try writer.nextRevision()
        let temporary = RevisionHistory.temporaryPrefix + "keep.\(getpid()).\(UInt32.random(in: 0...UInt32.max))"
        let lineName = RevisionHistory.lineName(number)
        do {
            let out = try history.directory.create(temporary, readable: true)
            defer { try? out.close() }
            let busy = DocumentError.unreadable(name: name, reason: "busy", message: "another program wrote it while it was kept as revision \(number); try again")
            do {
                var cost = SaveCost()
                try FileCopy.copyPrefix(file.descriptor, length: file.stat.size, to: out, &cost)
                writer.keptCost.bytesCopied += cost.bytesCopied
                writer.keptCost.bytesCloned += cost.bytesCloned
                try Directory.check { fsync(out.rawValue) }
                FaultPoint.keepCopied.reach()
                // Written meanwhile, the copy may be no one version of it: keep nothing now.
                guard FileSnapshot(try Errno.rethrowing { try file.descriptor.stat() }) == FileSnapshot(file.stat),
                      try root.stat(name)?.identity == file.stat.identity else {
                    throw busy
                }
                try history.directory.rename(temporary, to: history.directory, as: lineName)
                try history.directory.sync()
            } catch {
                try? history.directory.remove(temporary)
                // Cut while it was copied (a `cp` over it reads short): not an I/O error of ours.
                if !(error is DocumentError), changedSince(name, file) { throw busy }
                throw error
            }
            let line = FileSnapshot(try Errno.rethrowing { try out.stat() })
            try writer.append([.revision(number, line: number, length: file.stat.size, sha256: sha256, state: midstate,
                                         saved: Self.milliseconds(file.stat), source: source, document: FileSnapshot(file.stat), lineFile: line)],
                              durable: true)
            // Hashed here: the document as it was read, and the copy made of it.
            vouched.vouch(name, FileSnapshot(file.stat), length: file.stat.size, sha256: sha256)
            vouched.vouch(VouchedBytes.line(name, number), line, length: file.stat.size, sha256: sha256)
        } catch let error as Errno {
            throw .system("keep \(name) as revision \(number)", error)
        } catch let error as DocumentError {
            throw error
        } catch {
            throw .io(operation: "keep \(name) as revision \(number)", message: "\(error)")
        }
    }

    /// Moves a committed save's new file into the document's place: over the document, or, where
    /// there is none (deleted; a restore brings it back), only if the name is still free.
    func place(_ temporary: String, _ history: RevisionHistory, as name: String, replacing: Bool) throws {
        if replacing {
            try history.directory.rename(temporary, to: root, as: name)
        } else {
            do {
                try history.directory.link(temporary, to: root, as: name)
            } catch .fileExists {
                throw DocumentError.alreadyExists(name: name)
            }
            try history.directory.remove(temporary)
        }
        try root.sync()
    }

    /// Cuts a line's file to `length`; its snapshot after, or nil when it is gone.
    func shorten(_ file: String, _ history: RevisionHistory, to length: Int64) throws(Errno) -> FileSnapshot? {
        guard let writer = try? history.directory.openForWriting(file) else {
            if try history.directory.stat(file) == nil { return nil }
            throw .ioError
        }
        defer { try? writer.close() }
        try Directory.check { ftruncate(writer.rawValue, off_t(length)) }
        try Directory.check { fdatasync(writer.rawValue) }
        return FileSnapshot(try Errno.rethrowing { try writer.stat() })
    }

    /// Cuts the document to `length` (a tail an append of an older layout left); its stat after.
    func cut(_ name: String, _ file: OpenFile, to length: Int64) throws(DocumentError) -> Stat? {
        do {
            let writer = try root.openForWriting(name)
            defer { try? writer.close() }
            guard try Errno.rethrowing({ try writer.stat() }).identity == file.stat.identity else { return nil }
            try Directory.check { ftruncate(writer.rawValue, off_t(length)) }
            try Directory.check { fsync(writer.rawValue) }
            return try Errno.rethrowing { try writer.stat() }
        } catch {
            throw .system("cut the uncommitted end of \(name)", error)
        }
    }

    func hashWithState(_ file: OpenFile, _ name: String) throws(DocumentError) -> (String, SHA256Midstate, fed: Int64) {
        do {
            return try hashes.hashWithState(file.descriptor, file.stat, budget: hashBudget)
        } catch .timedOut {
            throw .unreadable(name: name, reason: "timeout", message: "hashing its \(file.stat.size) bytes took longer than \(hashBudget)")
        } catch {
            throw .system("read \(name)", error)
        }
    }

    /// A kept revision's file, open, checked: its bytes are the ones the log names, or it is
    /// refused. The line's file as the last writer left it is trusted; one changed since (by
    /// hand, or damage) is read again and compared with the revision's sha256. A writer passes
    /// the history it holds, which is then not opened again.
    func openKept(_ name: String, _ record: KeptRevision, _ state: HistoryState, in held: RevisionHistory? = nil) throws(DocumentError) -> OpenFile {
        let (line, length, sha256, number) = (record.line, record.length, record.sha256, record.revision)
        let opened: RevisionHistory?
        if let held { opened = held } else { opened = try history(name, create: false) }
        guard let history = opened else { throw .revisionNotFound(name: name, revision: number) }
        let file: OpenFile
        do {
            file = try openRegular(history.directory, RevisionHistory.lineName(line), document: name)
        } catch .notFound {
            throw .unreadable(name: name, reason: "damaged", message: "the file holding revision \(number) is gone from its history")
        } catch .unreadable(_, "notRegularFile", _) {
            throw .unreadable(name: name, reason: "damaged", message: "the file holding revision \(number) in its history is not a regular file")
        }
        // The log's seal of the line says which file it last saw, not what its bytes hash to: a
        // revision's bytes are hashed once a process before they are served or built on.
        let key = VouchedBytes.line(name, line), snapshot = FileSnapshot(file.stat)
        if vouched.holds(key, snapshot, length: length, sha256: sha256) { return file }
        let digest: String?
        do {
            digest = file.stat.size >= length ? try SHA256Hasher.prefixDigests(file.descriptor, lengths: [length])[length]?.0 : nil
        } catch {
            throw .system("read revision \(number) of \(name)", error)
        }
        guard digest == sha256 else {
            throw .unreadable(name: name, reason: "damaged", message: "the kept bytes of revision \(number) do not hash to the sha256 its record names (changed outside canvas bridge, or a forged record); they are not served")
        }
        vouched.vouch(key, snapshot, length: length, sha256: sha256)
        return file
    }

    /// Whether the document file holds the bytes of `revision`, which the history names for it:
    /// known to this process (it wrote or hashed the file as it is), or hashed now.
    func holds(_ name: String, _ file: OpenFile, _ revision: KeptRevision) throws(DocumentError) -> Bool {
        let snapshot = FileSnapshot(file.stat)
        if vouched.holds(name, snapshot, length: file.stat.size, sha256: revision.sha256) { return true }
        guard try hash(file, name) == revision.sha256 else { return false }
        vouched.vouch(name, snapshot, length: file.stat.size, sha256: revision.sha256)
        return true
    }

    /// The kept revisions, oldest first, the current one last. A document deleted from the
    /// folder still has its history: listed with none current.
    public func revisions(_ name: String) throws(DocumentError) -> [RevisionSummary] {
        try Self.check(name)
        let currentFile: Stat, current: Int, currentHash: String, kept: [KeptRevision]
        do throws(DocumentError) {
            (currentFile, current, currentHash, kept) = try reading(name) { (file) throws(DocumentError) in file.stat }
        } catch {
            guard let state = try historyWithoutDocument(name, after: error), !state.revisions.isEmpty else { throw error }
            return state.kept.map { summary(of: $0, current: false) }
        }
        var result = kept.filter { $0.revision < current }.map { summary(of: $0, current: false) }
        result.append(RevisionSummary(revision: current, bytes: currentFile.size, modified: Self.modified(currentFile), current: true,
                                      sha256: currentHash))
        return result
    }

    private func summary(of record: KeptRevision, current: Bool) -> RevisionSummary {
        RevisionSummary(revision: record.revision, bytes: record.length,
                        modified: Date(timeIntervalSince1970: Double(record.saved) / 1000), current: current, sha256: record.sha256)
    }

    /// Removes the revisions past what `keepRevisions` keeps (never revision 1, never the
    /// newest), then cuts or removes the line files only they needed. The save has happened: a
    /// failure here is finished by the next writer's `settle`, so it fails no request; it is
    /// told to `housekeeping`.
    func prune(_ writer: HistoryWriter) {
        let numbers = writer.state.kept.map(\.revision)
        let newest = Set(numbers.suffix(max(1, keepRevisions - 1)))
        let victims = numbers.filter { $0 != 1 && !newest.contains($0) }
        if !victims.isEmpty {
            do {
                let neededBefore = writer.state.neededLines
                try writer.append([.pruned(victims)], durable: true)
                FaultPoint.pruneRecorded.reach()
                // Only the lines the pruned revisions were in: any other file no revision needs
                // is the settle's to find (a listing here would cost every save a look through
                // the folder once the history is full).
                let needed = writer.state.neededLines
                var seals: [HistoryRecord] = []
                for (line, before) in neededBefore.sorted(by: { $0.key < $1.key }) where needed[line] != before {
                    let file = RevisionHistory.lineName(line)
                    if let length = needed[line] {
                        if let stat = try writer.history.directory.stat(file), stat.size > length,
                           let snapshot = try shorten(file, writer.history, to: length) {
                            seals.append(.seal(line, snapshot))
                        }
                    } else {
                        try writer.history.directory.remove(file)
                        seals.append(.seal(line, nil))
                    }
                }
                if !seals.isEmpty { try writer.append(seals, durable: false) }
            } catch {
                writer.untidy = true
                housekeeping.failed(.prune, "pruning revisions \(victims)", document: writer.history.name, error)
            }
        }
        housekeeping.tidy(.compaction, "compacting the history log", document: writer.history.name) {
            do {
                try writer.compactIfLong(histories)
            } catch {
                writer.untidy = true
                throw error
            }
        }
    }

    static func milliseconds(_ stat: Stat) -> Int64 {
        Int64(stat.rawValue.st_mtim.tv_sec) * 1000 + Int64(stat.rawValue.st_mtim.tv_nsec) / 1_000_000
    }

    static func now() -> Int64 {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        return Int64(now.tv_sec) * 1000 + Int64(now.tv_nsec) / 1_000_000
    }

    /// At start-up, settles each history a killed save left something in (a temporary file, an
    /// append's intent, a commit whose rename is not known to have happened), when no writer
    /// holds it: an uncommitted tail on a document is cut before anyone reads the folder, and
    /// the killed save's files are removed as the next save would (under the lock no save is
    /// under way, so no temporary file is anyone's), rather than waiting, perhaps for ever, for
    /// a next save of that document.
    func settleLeftovers() {
        for name in (try? root.directory(Self.revisionsFolderName, create: false).names()) ?? [] where (try? Self.check(name)) != nil {
            guard let history = try? history(name, create: false), let state = try? history.read(histories) else { continue }
            let temporaries = ((try? history.directory.names()) ?? []).contains { $0.hasPrefix(RevisionHistory.temporaryPrefix) }
            guard temporaries || state.intent != nil || state.pending != nil else { continue }
            housekeeping.tidy(.leftovers, "settling what a killed save left", document: name) {
                _ = try settleIfIdle(name, history, cleaning: true)
            }
        }
    }
}
