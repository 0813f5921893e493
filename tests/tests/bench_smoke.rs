//! `cargo xtask bench --quick` still runs and writes every figure. It asserts
//! no time: only that the benchmarks run and report.

use std::path::PathBuf;
use std::process::Command;

#[test]
fn xtask_bench_quick_runs_and_reports_every_figure() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf();
    let out = std::env::temp_dir().join(format!("sprout-bench-smoke-{}.json", std::process::id()));
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = Command::new(cargo)
        .args(["xtask", "bench", "--quick", "--out"])
        .arg(&out)
        .current_dir(&root)
        .status()
        .expect("cargo runs");
    assert!(status.success(), "cargo xtask bench --quick failed");
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    let _ = std::fs::remove_file(&out);
    let figures: std::collections::BTreeSet<u32> = report["figures"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["figure"].as_str().unwrap().parse().unwrap())
        .collect();
    assert_eq!(
        figures.into_iter().collect::<Vec<_>>(),
        (1..=15).collect::<Vec<_>>()
    );
}
