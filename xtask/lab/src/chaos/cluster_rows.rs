//! What a scenario left in the database: a customer's rows and its outbox.

use std::time::Duration;

use super::cluster::{Cluster, Customer};

impl Cluster {
    /// What an ingest of `customer` left: its findings and its passes (0 after one that
    /// failed whole).
    pub fn rows_left(&self, customer: &Customer) -> anyhow::Result<i64> {
        self.count(&format!(
            "SELECT (SELECT count(*) FROM findings WHERE customer_id = '{0}') + \
             (SELECT count(*) FROM analyzer_passes WHERE customer_id = '{0}')",
            customer.id
        ))
    }

    /// Runs `posture-api ingest` of `file` for `customer` again; returns whether it
    /// succeeded and the customer's findings after.
    pub fn ingest_again(&self, customer: &Customer, file: &str) -> anyhow::Result<(bool, i64)> {
        let ok = self
            .spawn_cli(&["ingest", "--customer", &customer.id, file])?
            .wait()?
            .success();
        let findings = self.count(&format!(
            "SELECT count(*) FROM findings WHERE customer_id = '{}'",
            customer.id
        ))?;
        Ok((ok, findings))
    }

    /// Deliveries of `customer` per status: (pending, delivered, failed).
    pub fn outbox(&self, customer: &Customer) -> anyhow::Result<(i64, i64, i64)> {
        let count = |status: &str| {
            self.count(&format!(
                "SELECT count(*) FROM webhook_deliveries WHERE customer_id = '{}' AND status = '{status}'",
                customer.id
            ))
        };
        Ok((count("pending")?, count("delivered")?, count("failed")?))
    }

    /// Waits until `customer` has no pending delivery (at most `limit`); returns how long.
    pub fn drained(&self, customer: &Customer, limit: Duration) -> anyhow::Result<Duration> {
        let started = std::time::Instant::now();
        while self.outbox(customer)?.0 > 0 {
            anyhow::ensure!(
                started.elapsed() < limit,
                "deliveries still pending after {limit:?}"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        Ok(started.elapsed())
    }
}
