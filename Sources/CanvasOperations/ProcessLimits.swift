import Glibc

/// The process's descriptor limit, which bounds how many peers canvasd can serve.
public enum ProcessLimits {
    /// The soft limit on open descriptors now.
    public static var descriptors: Int {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return 1_024 }
        return limit.rlim_cur >= rlim_t(Int32.max) ? Int(Int32.max) : Int(limit.rlim_cur)
    }

    /// Raises the soft descriptor limit to the hard one: systemd and shells start services at
    /// 1,024, which a few hundred web peers and the document store's own files exhaust. Returns
    /// the limit in force afterwards.
    @discardableResult
    public static func raiseDescriptorLimit() -> Int {
        var limit = rlimit()
        if getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0, limit.rlim_cur < limit.rlim_max {
            limit.rlim_cur = limit.rlim_max
            _ = setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        }
        return descriptors
    }
}
