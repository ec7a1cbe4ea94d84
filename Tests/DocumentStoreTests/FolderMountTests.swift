@testable import DocumentStore
import Foundation
import Testing

/// How canvasd tells a GlusterFS mount that serves stale answers from one that does not, read
/// from what the mount's `.meta` folder shows (the shapes below are GlusterFS 10.3's, seen on a
/// volume made by `gluster volume create` and mounted with `mount -t glusterfs`), and how a
/// mountinfo line is read. The whole path, on real mounts, is in test_glusterfs.py.
@Suite struct FolderMountTests {
    /// A client graph as GlusterFS 10.3 loads it for a new volume: write-behind, open-behind,
    /// quick-read and md-cache above the client, io-threads and io-stats on top.
    static func volfile(_ translators: [String]) -> String {
        var text = "volume v-client-0\n    type protocol/client\n    option remote-host vm\nend-volume\n\n"
        var below = "v-client-0"
        for translator in translators {
            text += "volume v-\(translator)\n    type performance/\(translator)\n    subvolumes \(below)\nend-volume\n\n"
            below = "v-\(translator)"
        }
        return text + "volume v\n    type debug/io-stats\n    subvolumes \(below)\nend-volume\n"
    }

    static func commandLine(_ options: String) -> String {
        "{ \n  \"Cmdlinestr\": \"/usr/sbin/glusterfs \(options) --process-name fuse --volfile-server=vm --volfile-id=/docs /mnt/docs\"\n}\n"
    }

    @Test func theDefaultsAreRefusedWithTheirFixes() {
        let problems = FolderMount.glusterProblems(
            commandLine: Self.commandLine(""),
            volfile: Self.volfile(["write-behind", "open-behind", "quick-read", "md-cache", "io-threads"]))
        #expect(problems == [
            "mounted with entry-timeout=1 (the kernel keeps what it read for that long): mount with -o entry-timeout=0",
            "mounted with attribute-timeout=1 (the kernel keeps what it read for that long): mount with -o attribute-timeout=0",
            "its volume caches on the client (md-cache): gluster volume set docs performance.stat-prefetch off",
            "its volume caches on the client (quick-read): gluster volume set docs performance.quick-read off",
            "its volume caches on the client (open-behind): gluster volume set docs performance.open-behind off",
        ])
    }

    @Test func theSafeOptionsPass() {
        let problems = FolderMount.glusterProblems(
            commandLine: Self.commandLine("--attribute-timeout=0 --entry-timeout=0 --negative-timeout=0"),
            volfile: Self.volfile(["write-behind", "io-threads"]))
        #expect(problems.isEmpty)
    }

    @Test func aNegativeTimeoutOrAKeptPageCacheIsRefused() {
        let problems = FolderMount.glusterProblems(
            commandLine: Self.commandLine("--attribute-timeout=0 --entry-timeout=0.0 --negative-timeout=2 --fopen-keep-cache=yes"),
            volfile: Self.volfile(["write-behind"]))
        #expect(problems == [
            "mounted with negative-timeout=2 (the kernel keeps what it read for that long): mount with -o negative-timeout=0",
            "mounted with fopen-keep-cache (the kernel keeps a file's pages across opens): mount without it",
        ])
    }

    @Test func aMountinfoLineGivesItsPointUnescapedAndItsType() throws {
        let line: Substring = "312 28 0:45 / /mnt/two\\040words rw,relatime shared:160 - fuse.glusterfs vm:/docs rw,user_id=0"
        let entry = try #require(FolderMount.parse(line))
        #expect(entry.point == "/mnt/two words")
        #expect(entry.type == "fuse.glusterfs")
        #expect(FolderMount.parse("too short - x") == nil)
    }

    @Test func theRootIsFoundAndALocalFolderIsNoNetwork() throws {
        let mount = try #require(FolderMount.of("/"))
        #expect(mount.mountPoint == "/")
        #expect(mount.problems.isEmpty)
    }

    /// A `.meta` folder as a mount point would show it, in a fresh folder.
    static func meta(_ label: String, commandLine: (URL) throws -> Void) throws -> URL {
        let point = try freshFolder("mount-\(label)")
        let graphs = point.appendingPathComponent(".meta/graphs/active")
        try FileManager.default.createDirectory(at: graphs, withIntermediateDirectories: true)
        try Data(volfile(["write-behind"]).utf8).write(to: graphs.appendingPathComponent("volfile"))
        try commandLine(point.appendingPathComponent(".meta/cmdline"))
        return point
    }

    /// Before, the command line was read whole whatever its size: one of 2 MiB that named the safe
    /// options was believed, and a link to /dev/zero grew canvasd's memory until it was killed.
    @Test func aMetaFileLargerThanAnyGlusterFSWritesIsNotBelieved() throws {
        let safe = "--attribute-timeout=0 --entry-timeout=0 --negative-timeout=0"
        let small = try Self.meta("small") { try Data(Self.commandLine(safe).utf8).write(to: $0) }
        #expect(FolderMount.glusterProblems(mountPoint: small.path).isEmpty)
        let padded = try Self.meta("padded") {
            try Data(Self.commandLine(safe + String(repeating: " ", count: 2 << 20)).utf8).write(to: $0)
        }
        let problems = FolderMount.glusterProblems(mountPoint: padded.path)
        #expect(problems.count == 1 && problems[0].contains("cannot be read"), "\(problems)")
        let endless = try Self.meta("endless") { try FileManager.default.createSymbolicLink(atPath: $0.path, withDestinationPath: "/dev/zero") }
        let started = ContinuousClock.now
        #expect(FolderMount.glusterProblems(mountPoint: endless.path).first?.contains("cannot be read") == true)
        #expect(ContinuousClock.now - started < .seconds(10))
    }
}
