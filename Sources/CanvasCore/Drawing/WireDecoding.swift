/// A string enum read from the wire: a value it does not have fails with the values it does
/// have, in words a client can act on, instead of the decoder's "Cannot initialize … from
/// invalid String value".
public protocol WireEnum: RawRepresentable, CaseIterable, Decodable where RawValue == String {}

extension WireEnum {
    public init(from decoder: any Decoder) throws {
        let raw = try decoder.singleValueContainer().decode(String.self)
        guard let value = Self(rawValue: raw) else {
            throw DecodingError.dataCorrupted(.init(
                codingPath: decoder.codingPath,
                debugDescription: "\"\(raw)\" is not one of \(Self.allCases.map(\.rawValue).joined(separator: ", "))"))
        }
        self = value
    }
}

extension InkTool: WireEnum {}
extension EraseMode: WireEnum {}
extension PreferredTapAction: WireEnum {}
extension TapPolicy: WireEnum {}

private struct FieldKey: CodingKey {
    let stringValue: String
    init(stringValue: String) { self.stringValue = stringValue }
    var intValue: Int? { nil }
    init?(intValue: Int) { nil }
}

extension Decoder {
    /// Runs a checking initializer while decoding. A value it refuses becomes a
    /// `DecodingError` at that value's own path (`points[3].x`), so the reply can name it.
    func validated<T>(_ make: () throws -> T) throws -> T {
        do {
            return try make()
        } catch let error as DrawingValidationError {
            var path = codingPath
            if path.last?.stringValue != error.field { path.append(FieldKey(stringValue: error.field)) }
            throw DecodingError.dataCorrupted(.init(codingPath: path, debugDescription: error.description))
        }
    }
}
