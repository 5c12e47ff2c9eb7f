//! The API's metrics recorder does not keep what it records: histogram samples are folded
//! into their buckets by the upkeep `install_recorder` starts, scraped or not. Measured with
//! dhat's heap statistics (this test binary's only test, so the global recorder and the
//! heap are its own) on tokio's paused clock.

use std::time::Duration;

use posture_startup::metrics::{UPKEEP_EVERY, install_recorder};

#[global_allocator]
static ALLOCATOR: dhat::Alloc = dhat::Alloc;

const SAMPLES: usize = 200_000;

fn live() -> usize {
    dhat::HeapStats::get().curr_bytes
}

/// Lets the upkeep task run at the paused clock.
async fn settle() {
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn samples_recorded_without_a_scrape_are_let_go_by_the_upkeep() {
    let _profiler = dhat::Profiler::builder().testing().build();
    let _handle = install_recorder().unwrap();
    let histogram = metrics::histogram!("upkeep_test_seconds", "route" => "/x");
    histogram.record(0.001);
    tokio::time::advance(UPKEEP_EVERY + Duration::from_millis(1)).await;
    settle().await;
    let before = live();

    for i in 0..SAMPLES {
        histogram.record(f64::from(i as u32 % 1000) / 1000.0);
    }
    let held = live().saturating_sub(before);
    assert!(
        held >= SAMPLES * 8,
        "{SAMPLES} samples should be held until the upkeep, but only {held} bytes grew"
    );

    tokio::time::advance(UPKEEP_EVERY + Duration::from_millis(1)).await;
    settle().await;
    // Recording again pins crossbeam's epoch, which frees what the upkeep unlinked.
    for _ in 0..1_000 {
        histogram.record(0.5);
    }
    settle().await;
    let kept = live().saturating_sub(before);
    assert!(
        kept < held / 10,
        "after the upkeep {kept} of the {held} bytes are still held"
    );
}
