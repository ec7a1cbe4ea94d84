/// What a subscription to `topic` may be told, as far as the instance itself knows.
public enum SubscriptionCheck: Equatable, Sendable {
    case allowed
    case refused
    /// The topic names a session this instance does not hold: only the session store knows
    /// whose it is.
    case askStore(session: String)
}
