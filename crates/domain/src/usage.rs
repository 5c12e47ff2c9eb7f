//! What each customer's data takes in the shared database, by category: what an operator
//! reads to see who uses how much (`posture-api customers usage`, and the worker's gauges of
//! the spread between customers, which name no customer).

use crate::ids::CustomerId;

string_enum! {
    /// What a customer's stored data is, by what wrote it.
    pub enum StorageCategory ("category") {
        /// Findings, triage marks included (the analyzer's passes, the customer's triage).
        Findings = "findings",
        /// Identities, tenants, role assignments and recommendations, scores (the analyzer).
        Directory = "directory",
        /// Triage history records and the comments kept once per write.
        Triage = "triage",
        /// The events feed.
        Events = "events",
        /// Webhook deliveries, their attempts and the bodies chunks share.
        Deliveries = "deliveries",
        /// Answers kept for idempotent retries (24 hours).
        Answers = "answers",
        /// SCIM users, groups and members.
        Scim = "scim",
        /// The audit log (console, keys, SCIM changes).
        Audit = "audit",
        /// Keys, sign-in settings, console sessions, and the customer's bookkeeping rows.
        Accounts = "accounts",
    }
}

/// Rows and their bytes (as stored: the rows' own size, compressed values included;
/// indexes and free space not counted).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    pub rows: u64,
    pub bytes: u64,
}

/// One customer's usage, by category.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CustomerUsage {
    pub customer: CustomerId,
    pub categories: Vec<(StorageCategory, Usage)>,
}

impl CustomerUsage {
    /// Bytes over every category.
    pub fn total_bytes(&self) -> u64 {
        self.categories.iter().map(|(_, u)| u.bytes).sum()
    }

    /// Bytes of `category` (0 when it holds none).
    pub fn bytes_of(&self, category: StorageCategory) -> u64 {
        self.categories
            .iter()
            .find(|(c, _)| *c == category)
            .map_or(0, |(_, u)| u.bytes)
    }
}

/// How `category`'s bytes spread over `customers`: the median, the 99th percentile and the
/// largest (nearest rank; zeros with no customer).
pub fn spread(customers: &[CustomerUsage], category: StorageCategory) -> [u64; 3] {
    let mut bytes: Vec<u64> = customers.iter().map(|c| c.bytes_of(category)).collect();
    bytes.sort_unstable();
    let at = |q: f64| -> u64 {
        if bytes.is_empty() {
            return 0;
        }
        let rank = ((q * bytes.len() as f64).ceil() as usize).clamp(1, bytes.len());
        bytes[rank - 1]
    };
    [at(0.5), at(0.99), at(1.0)]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of(findings: u64) -> CustomerUsage {
        CustomerUsage {
            customer: CustomerId::generate(),
            categories: vec![
                (
                    StorageCategory::Findings,
                    Usage {
                        rows: 1,
                        bytes: findings,
                    },
                ),
                (StorageCategory::Events, Usage { rows: 1, bytes: 10 }),
            ],
        }
    }

    #[test]
    fn the_spread_names_no_customer_and_shows_the_one_that_stands_out() {
        let mut customers: Vec<CustomerUsage> = (1..=99).map(of).collect();
        customers.push(of(1_000_000));
        assert_eq!(
            spread(&customers, StorageCategory::Findings),
            [50, 99, 1_000_000]
        );
        assert_eq!(spread(&customers, StorageCategory::Scim), [0, 0, 0]);
        assert_eq!(spread(&[], StorageCategory::Findings), [0, 0, 0]);
        assert_eq!(customers[99].total_bytes(), 1_000_010);
    }
}
