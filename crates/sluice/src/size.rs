//! `sluice size`: the sizing calculator. It takes the storage throughput one broker gets from
//! the volume (measured as `sluice volume check` does, or given), applies
//!
//! ```text
//! max cluster produce throughput <= storage throughput x brokers / copies
//! ```
//!
//! (Kafka writes every byte once per replica; Sluice writes one physical copy and leaves
//! protection to the volume), and prints, for Kafka with RF 3, 2 and 1 and for Sluice, the
//! most a given cluster can take, the brokers a target produce rate needs with headroom, and
//! the capacity a retention needs at a compression ratio. [`plan`] is pure and unit-tested.

use std::path::PathBuf;

use anyhow::{bail, Result};

#[derive(Debug, clap::Args)]
pub(crate) struct SizeArgs {
    /// Measure the volume in a scratch directory under this path (as `sluice volume check`).
    #[arg(long, value_name = "DIR", conflicts_with = "storage_mbps")]
    path: Option<PathBuf>,
    /// The storage write throughput one broker gets, in MB/s (instead of measuring it).
    #[arg(long, value_name = "MB/S")]
    storage_mbps: Option<f64>,
    /// MiB written for the measurement.
    #[arg(long, default_value_t = 256)]
    size_mb: u64,
    /// Brokers in the cluster, for the "max produce" column.
    #[arg(long, default_value_t = 3)]
    brokers: u32,
    /// Target produce rate of the cluster, in MB/s.
    #[arg(long, value_name = "MB/S")]
    target_mbps: Option<f64>,
    /// Share of the storage throughput kept free (0.3: plan for 70% of it).
    #[arg(long, default_value_t = 0.3)]
    headroom: f64,
    /// Retention to plan capacity for, in hours.
    #[arg(long, default_value_t = 168.0)]
    retention_hours: f64,
    /// Logical to physical bytes (e.g. 2.0 with broker-side compression; 1.0 for none).
    #[arg(long, default_value_t = 1.0)]
    compression_ratio: f64,
}

/// One line of the table.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Line {
    pub(crate) name: &'static str,
    pub(crate) copies: u32,
    /// Most the cluster of `brokers` can take, MB/s.
    pub(crate) max_mbps: f64,
    /// Brokers the target needs with headroom.
    pub(crate) brokers_needed: Option<u64>,
    /// Storage for the retention, TB (decimal).
    pub(crate) capacity_tb: Option<f64>,
}

/// The table for a storage throughput of `storage_mbps` per broker.
pub(crate) fn plan(
    storage_mbps: f64,
    brokers: u32,
    target_mbps: Option<f64>,
    headroom: f64,
    retention_hours: f64,
    compression_ratio: f64,
) -> Vec<Line> {
    let usable = storage_mbps * (1.0 - headroom);
    [
        ("Kafka RF=3", 3),
        ("Kafka RF=2", 2),
        ("Kafka RF=1", 1),
        ("Sluice", 1),
    ]
    .into_iter()
    .map(|(name, copies)| {
        let c = f64::from(copies);
        Line {
            name,
            copies,
            max_mbps: storage_mbps * f64::from(brokers) / c,
            brokers_needed: target_mbps
                .filter(|_| usable > 0.0)
                .map(|t| ((t * c / usable).ceil() as u64).max(1)),
            capacity_tb: target_mbps
                .map(|t| t * 1e6 * retention_hours * 3600.0 * c / compression_ratio / 1e12),
        }
    })
    .collect()
}

pub(crate) fn run(args: SizeArgs) -> Result<()> {
    if !(0.0..1.0).contains(&args.headroom) {
        bail!("--headroom must be in [0, 1)");
    }
    if args.compression_ratio <= 0.0 || args.retention_hours < 0.0 || args.brokers == 0 {
        bail!("--compression-ratio must be positive, --retention-hours not negative, --brokers at least 1");
    }
    let storage_mbps = match (args.storage_mbps, &args.path) {
        (Some(s), _) if s > 0.0 => s,
        (Some(_), _) => bail!("--storage-mbps must be positive"),
        (None, Some(path)) => {
            let opts = sluice_store::volume::VolumeCheckOptions {
                throughput_bytes: args.size_mb.max(1) * 1024 * 1024,
                ..Default::default()
            };
            let r = sluice_store::volume::check_volume(path, opts)?;
            println!(
                "Measured {}: sequential write {:.0} MiB/s, read {:.0} MiB/s, fsync {:.0}/s (p99 {} us)",
                path.display(),
                r.write_mib_per_sec,
                r.read_mib_per_sec,
                r.fsync_per_sec,
                r.fsync_p99_us
            );
            r.write_mib_per_sec * 1.048_576
        }
        (None, None) => bail!("give --path DIR to measure the volume, or --storage-mbps"),
    };
    println!(
        "Storage throughput per broker: {storage_mbps:.0} MB/s; headroom {:.0}%; retention {} h; compression {:.2}:1",
        args.headroom * 100.0,
        args.retention_hours,
        args.compression_ratio
    );
    println!("max cluster produce <= storage throughput x brokers / copies\n");
    let lines = plan(
        storage_mbps,
        args.brokers,
        args.target_mbps,
        args.headroom,
        args.retention_hours,
        args.compression_ratio,
    );
    let target = args
        .target_mbps
        .map_or(String::new(), |t| format!("for {t:.0} MB/s"));
    println!(
        "{:<12} {:>6} {:>22} {:>18} {:>18}",
        "",
        "copies",
        format!("max MB/s ({} brokers)", args.brokers),
        format!("brokers {target}"),
        "capacity (TB)"
    );
    for l in &lines {
        println!(
            "{:<12} {:>6} {:>22.0} {:>18} {:>18}",
            l.name,
            l.copies,
            l.max_mbps,
            l.brokers_needed.map_or("-".into(), |b| b.to_string()),
            l.capacity_tb.map_or("-".into(), |c| format!("{c:.1}")),
        );
    }
    println!(
        "\nSluice keeps one physical copy; the volume's own protection (RAID, snapshots,\n\
         replication) stands in for Kafka's replicas. With one shared volume, its total\n\
         throughput also bounds the cluster, whatever the broker count."
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_formula_and_the_broker_count() {
        let lines = plan(500.0, 3, Some(600.0), 0.3, 24.0, 2.0);
        let by = |n: &str| lines.iter().find(|l| l.name == n).cloned();
        let kafka3 = by("Kafka RF=3").expect("row");
        let sluice = by("Sluice").expect("row");
        assert_eq!(kafka3.max_mbps, 500.0);
        assert_eq!(sluice.max_mbps, 1500.0);
        // 600 MB/s x 3 copies / (500 x 0.7) = 5.14 -> 6 brokers; Sluice: 1.71 -> 2.
        assert_eq!(kafka3.brokers_needed, Some(6));
        assert_eq!(sluice.brokers_needed, Some(2));
        // 600 MB/s for a day at 2:1, one copy: 25.92 TB.
        let tb = sluice.capacity_tb.expect("capacity");
        assert!((tb - 25.92).abs() < 1e-9, "{tb}");
        assert_eq!(plan(500.0, 3, None, 0.3, 24.0, 2.0)[0].brokers_needed, None);
    }
}
