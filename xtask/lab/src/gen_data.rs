//! `cargo xtask gen-data`: demo data at benchmark scale, one JSON Lines file per customer.

use std::{io::BufWriter, path::PathBuf};

use clap::Args;

use crate::{
    demo_data::{CustomerSpec, write_customer},
    process::eprintln_status,
};

#[derive(Args, Debug)]
pub struct GenDataArgs {
    /// Directory to write `customer-NNN.jsonl` files to.
    #[arg(long)]
    pub out: PathBuf,
    /// Number of customers.
    #[arg(long, default_value_t = 200)]
    pub customers: usize,
    /// Findings over all customers.
    #[arg(long, default_value_t = 1_000_000)]
    pub findings: usize,
    /// Findings of the first (largest) customer; the rest share the remainder.
    #[arg(long, default_value_t = 200_000)]
    pub largest: usize,
    /// Identities per customer (the largest gets five times as many).
    #[arg(long, default_value_t = 500)]
    pub identities: usize,
    /// Days of UPR history.
    #[arg(long, default_value_t = 0)]
    pub upr_days: u32,
}

/// The specs of a data set: customer 0 is the largest.
pub fn specs(args: &GenDataArgs) -> Vec<CustomerSpec> {
    let others = args.customers.saturating_sub(1).max(1);
    let rest = args.findings.saturating_sub(args.largest) / others;
    (0..args.customers)
        .map(|i| CustomerSpec {
            name: format!("Customer {i:03}"),
            tenants: 1 + i % 3,
            identities: if i == 0 {
                args.identities * 5
            } else {
                args.identities
            },
            findings: if i == 0 { args.largest } else { rest },
            upr_days: args.upr_days,
            seed: 1000 + i as u64,
        })
        .collect()
}

pub fn run(args: &GenDataArgs) -> anyhow::Result<()> {
    std::fs::create_dir_all(&args.out)?;
    let today = crate::demo_data::today();
    for (i, spec) in specs(args).iter().enumerate() {
        let path = args.out.join(format!("customer-{i:03}.jsonl"));
        let mut out = BufWriter::with_capacity(1 << 20, std::fs::File::create(&path)?);
        write_customer(spec, today, &mut out)?;
        std::io::Write::flush(&mut out)?;
    }
    eprintln_status(&format!(
        "wrote {} customers to {}",
        args.customers,
        args.out.display()
    ));
    Ok(())
}
