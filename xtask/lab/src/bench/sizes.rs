//! The sizes of the scenarios that do not follow the data's: the default ones, or a smoke
//! run's (`--smoke`: every scenario at a small size).

/// New findings of the fan-out's pass, by default.
pub(super) const NEW_FINDINGS: usize = 100_000;
/// Deliveries of the delivery log's subscription, by default.
pub(super) const DELIVERIES: u32 = 100_000;

/// The sizes of the scenarios that do not follow the data's.
#[derive(Clone, Copy, Debug)]
pub(super) struct Sizes {
    /// New findings of the pass whose fan-out `deliveries.rs` measures.
    pub new_findings: usize,
    /// Deliveries of the subscription whose log `delivery_log.rs` reads.
    pub deliveries: u32,
    /// A smoke run: windows of a second, and a queue that runs dry is no failure.
    pub smoke: bool,
}

impl Sizes {
    /// The default sizes, or a smoke run's.
    pub(super) fn of(smoke: bool) -> Self {
        if smoke {
            Self {
                new_findings: 1_000,
                deliveries: 2_000,
                smoke: true,
            }
        } else {
            Self {
                new_findings: NEW_FINDINGS,
                deliveries: DELIVERIES,
                smoke: false,
            }
        }
    }
}
