//! Customers and the scope that every read of customer data carries.

use chrono::{DateTime, Utc};

use crate::ids::CustomerId;

/// A customer: the owner of API keys, connected tenants and all analyzer data.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Customer {
    pub id: CustomerId,
    pub name: String,
    pub created_at: DateTime<Utc>,
}

/// Longest customer name accepted.
pub const MAX_CUSTOMER_NAME_LEN: usize = 200;

/// The customer whose data a call may touch.
///
/// Every repository method that reads or writes customer data takes a `CustomerScope` first
/// and filters by it inside its SQL. There are exactly two ways to obtain one:
/// [`Principal::scope`](crate::Principal::scope), after an API key was verified, and
/// [`CustomerScope::for_operator`], for operator commands run with database credentials.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CustomerScope {
    customer: CustomerId,
}

impl CustomerScope {
    pub(crate) const fn new(customer: CustomerId) -> Self {
        Self { customer }
    }

    /// The scope of an operator command (`posture-api ingest --customer ...`), which is
    /// trusted because it runs with the database's own credentials. Request handlers never
    /// call this: they get their scope from the verified key.
    pub const fn for_operator(customer: CustomerId) -> Self {
        Self::new(customer)
    }

    /// The scope of the console's sign-in pages, which name their customer in the path:
    /// they read only the customer's sign-in configuration and pending sign-ins. Pages past
    /// sign-in take their scope from the verified session instead.
    pub const fn for_sign_in(customer: CustomerId) -> Self {
        Self::new(customer)
    }

    pub const fn customer_id(&self) -> CustomerId {
        self.customer
    }
}
