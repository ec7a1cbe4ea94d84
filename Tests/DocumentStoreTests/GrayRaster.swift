import Foundation
import Testing

/// A page rendered by pdftoppm in 8-bit grey, anti-aliased as a viewer shows it; kept as a
/// gzipped PGM when it is a fixture.
struct GrayRaster: Equatable {
    let width: Int
    let height: Int
    let pixels: [UInt8]

    subscript(x: Int, y: Int) -> Int { Int(pixels[y * width + x]) }

    /// Renders one page (numbered from 0), the visible box, at `dpi`.
    static func render(_ path: String, page: Int, dpi: Int) throws -> GrayRaster {
        let out = FileManager.default.temporaryDirectory.appendingPathComponent("gray-\(UUID().uuidString)")
        let status = try run("/usr/bin/pdftoppm", ["-r", String(dpi), "-gray", "-cropbox", "-f", String(page + 1), "-l", String(page + 1),
                                                   "-singlefile", path, out.path]).status
        let file = out.appendingPathExtension("pgm")
        defer { try? FileManager.default.removeItem(at: file) }
        guard status == 0 else { throw Raster.RenderFailure(message: "pdftoppm exited \(status) on \(path)") }
        return try parse(Array(Data(contentsOf: file)))
    }

    /// Reads a gzipped PGM (gzip is on every machine that has pdftoppm).
    static func load(gzipped url: URL) throws -> GrayRaster {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/gzip")
        process.arguments = ["-dc", url.path]
        let pipe = Pipe()
        process.standardOutput = pipe
        try process.run()
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else { throw Raster.RenderFailure(message: "gzip -dc \(url.path) exited \(process.terminationStatus)") }
        return try parse(Array(data))
    }

    /// Writes this raster as a gzipped PGM at `url` (how a fixture is recorded).
    func save(gzipped url: URL) throws {
        let plain = url.deletingPathExtension()
        try Data(Array("P5\n\(width) \(height)\n255\n".utf8) + pixels).write(to: plain)
        #expect(try run("/bin/gzip", ["-9", "-n", "-f", plain.path]).status == 0)
    }

    static func parse(_ bytes: [UInt8]) throws -> GrayRaster {
        let (fields, index) = Raster.netpbmHeader(bytes)
        guard fields[0] == "P5", let width = Int(fields[1]), let height = Int(fields[2]), bytes.count >= index + width * height else {
            throw Raster.RenderFailure(message: "not an 8-bit PGM")
        }
        return GrayRaster(width: width, height: height, pixels: Array(bytes[index..<(index + width * height)]))
    }
}
