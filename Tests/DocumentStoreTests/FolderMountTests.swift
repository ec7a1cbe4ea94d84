@testable import DocumentStore
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
}
