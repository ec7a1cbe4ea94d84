extension Duration {
    /// The duration in seconds, for metrics (every request's handling time).
    package var seconds: Double {
        // `components` divides a 128-bit count of attoseconds: once, not once a field.
        let (seconds, attoseconds) = components
        return Double(seconds) + Double(attoseconds) / 1e18
    }
    /// The whole milliseconds in it, for timeouts and logs.
    package var milliseconds: Int64 { components.seconds * 1000 + components.attoseconds / 1_000_000_000_000_000 }
}
