import Foundation

/// A page rendered by pdftoppm, as 8-bit RGB.
struct Raster: Equatable {
    let width: Int
    let height: Int
    let pixels: [UInt8]

    func rgb(_ x: Int, _ y: Int) -> (Int, Int, Int) {
        let i = (y * width + x) * 3
        return (Int(pixels[i]), Int(pixels[i + 1]), Int(pixels[i + 2]))
    }

    /// Renders one page (numbered from 0) of the PDF at `path`, the visible box only.
    static func render(_ path: String, page: Int, dpi: Double = 72) throws -> Raster {
        let out = FileManager.default.temporaryDirectory.appendingPathComponent("render-\(UUID().uuidString)")
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/pdftoppm")
        process.arguments = ["-r", String(dpi), "-cropbox", "-aa", "no", "-aaVector", "no", "-f", String(page + 1), "-l", String(page + 1),
                             "-singlefile", path, out.path]
        process.standardError = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        let file = out.appendingPathExtension("ppm")
        defer { try? FileManager.default.removeItem(at: file) }
        guard process.terminationStatus == 0 else { throw RenderFailure(message: "pdftoppm exited \(process.terminationStatus) on \(path)") }
        return try parsePPM(Array(Data(contentsOf: file)))
    }

    struct RenderFailure: Error { let message: String }

    /// A binary netpbm image's header (`P5`/`P6`, width, height, maximum) and where its pixels start.
    static func netpbmHeader(_ bytes: [UInt8]) -> (fields: [String], pixels: Int) {
        var fields: [String] = []
        var index = 0
        while fields.count < 4 {
            while bytes[index] == 0x20 || bytes[index] == 0x0A { index += 1 }
            var field = ""
            while bytes[index] != 0x20 && bytes[index] != 0x0A { field.append(Character(UnicodeScalar(bytes[index]))); index += 1 }
            fields.append(field)
        }
        return (fields, index + 1)
    }

    static func parsePPM(_ bytes: [UInt8]) throws -> Raster {
        // P6 <w> <h> <max>\n then RGB bytes.
        let (fields, index) = netpbmHeader(bytes)
        guard fields[0] == "P6", let width = Int(fields[1]), let height = Int(fields[2]) else { throw RenderFailure(message: "not a PPM") }
        return Raster(width: width, height: height, pixels: Array(bytes[index..<(index + width * height * 3)]))
    }
}

/// Where a render differs from another: the changed pixels, grouped into blobs.
struct Difference {
    var blobs: [(x: Double, y: Double, count: Int)] = []
    var changed = 0

    init(_ before: Raster, _ after: Raster) {
        precondition(before.width == after.width && before.height == after.height, "renders of different sizes")
        var mask = [Bool](repeating: false, count: before.width * before.height)
        for i in 0..<mask.count where before.pixels[3 * i] != after.pixels[3 * i] || before.pixels[3 * i + 1] != after.pixels[3 * i + 1]
            || before.pixels[3 * i + 2] != after.pixels[3 * i + 2] {
            mask[i] = true
            changed += 1
        }
        var seen = [Bool](repeating: false, count: mask.count)
        for start in mask.indices where mask[start] && !seen[start] {
            var stack = [start], sumX = 0.0, sumY = 0.0, count = 0
            seen[start] = true
            while let i = stack.popLast() {
                let x = i % before.width, y = i / before.width
                sumX += Double(x) + 0.5
                sumY += Double(y) + 0.5
                count += 1
                for (dx, dy) in [(-1, 0), (1, 0), (0, -1), (0, 1)] {
                    let nx = x + dx, ny = y + dy
                    guard nx >= 0, ny >= 0, nx < before.width, ny < before.height else { continue }
                    let j = ny * before.width + nx
                    if mask[j] && !seen[j] { seen[j] = true; stack.append(j) }
                }
            }
            blobs.append((sumX / Double(count), sumY / Double(count), count))
        }
    }
}
