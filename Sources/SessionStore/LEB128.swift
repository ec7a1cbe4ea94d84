/// Unsigned LEB128, the numbers of the session store's binary forms (byte deltas, operation
/// entries): seven bits a byte, low bits first, the top bit set on every byte but the last.
public enum LEB128 {
    public static func append(_ value: UInt64, to out: inout [UInt8]) {
        var value = value
        while value >= 0x80 {
            out.append(UInt8(truncatingIfNeeded: value) | 0x80)
            value >>= 7
        }
        out.append(UInt8(value))
    }

    /// The number at `offset` in `bytes`, `offset` moved past it; nil when the bytes end in it
    /// or it has bits past 64 (at most ten bytes are read), `offset` then left where it failed.
    public static func read<Bytes: RandomAccessCollection<UInt8>>(_ bytes: Bytes, at offset: inout Int) -> UInt64? where Bytes.Index == Int {
        var value: UInt64 = 0
        for shift in Swift.stride(from: 0, to: 64, by: 7) {
            guard offset < bytes.endIndex else { return nil }
            let byte = bytes[offset]
            offset += 1
            if shift == 63 && byte > 1 { return nil }
            value |= UInt64(byte & 0x7F) << UInt64(shift)
            if byte & 0x80 == 0 { return value }
        }
        return nil
    }
}
