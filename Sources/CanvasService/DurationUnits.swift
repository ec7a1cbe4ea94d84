extension Duration {
    /// The duration in seconds, for metrics.
    var seconds: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
    /// The whole milliseconds in it, for timeouts and logs.
    var milliseconds: Int64 { components.seconds * 1000 + components.attoseconds / 1_000_000_000_000_000 }
}
