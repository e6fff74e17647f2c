//! `ftl-sim`: the FTL simulator's command line.

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use sim_host::steady_state::SteadyState;

#[derive(Parser)]
#[command(
    name = "ftl-sim",
    version,
    about = "NAND FTL simulator on the built-in emulator"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Short self-contained run: steady-state WAF and wear of the baseline at several fill levels.
    Demo {
        /// Fewer overwrites (for a quick look).
        #[arg(long)]
        quick: bool,
    },
    /// Steady-state WAF under uniform random overwrites at the given fill levels (percent of raw).
    Waf {
        /// Fill levels, percent of raw capacity in use.
        #[arg(long, value_delimiter = ',', default_values_t = vec![60.0, 73.0, 80.0, 90.0])]
        fill: Vec<f64>,
        /// Overwrites before measuring, in multiples of the logical capacity.
        #[arg(long, default_value_t = 4.0)]
        warmup: f64,
        /// Overwrites measured, in multiples of the logical capacity.
        #[arg(long, default_value_t = 4.0)]
        measure: f64,
        /// Seed of the address stream.
        #[arg(long, default_value_t = 1)]
        seed: u64,
    },
    /// NAND reads of a mount after a clean unmount and after power cuts (90% fill).
    Mount {
        /// Power cuts to try.
        #[arg(long, default_value_t = 20)]
        cuts: u32,
    },
}

/// WAF an independent greedy page-mapped FTL measured on the same geometry (issue #2's anchor).
fn anchor(fill: f64) -> Option<f64> {
    [(60.0, 1.42), (73.0, 2.0), (80.0, 2.57), (90.0, 4.83)]
        .iter()
        .find(|(f, _)| (*f - fill).abs() < 0.01)
        .map(|x| x.1)
}

fn waf_table(fills: &[f64], warmup: f64, measure: f64, seed: u64) -> Result<(), String> {
    println!("geometry: 1024 blocks x 64 pages x 2 KiB, 2 planes; uniform random single-page overwrites");
    println!(
        "{:>6} {:>9} {:>8} {:>9} {:>8} {:>10} {:>7} {:>9}",
        "fill%", "WAF(gc)", "anchor", "diff", "WAF(all)", "ec min-max", "spread", "RAM KiB"
    );
    for &fill in fills {
        if !(1.0..=99.0).contains(&fill) {
            return Err(format!("fill level {fill} is not a percentage between 1 and 99"));
        }
        let run = SteadyState {
            geometry: SteadyState::ANCHOR_GEOMETRY,
            utilization_permille: (fill * 10.0).round() as u32,
            warmup,
            measure,
            seed,
        };
        let r = run.run()?;
        let (a, d) = match anchor(fill) {
            Some(a) => (
                format!("{a:.2}"),
                format!("{:+.1}%", (r.waf_gc / a - 1.0) * 100.0),
            ),
            None => ("-".into(), "-".into()),
        };
        println!(
            "{:>6.1} {:>9.2} {:>8} {:>9} {:>8.2} {:>10} {:>7} {:>9}",
            fill,
            r.waf_gc,
            a,
            d,
            r.waf_total,
            format!("{}-{}", r.erase_min, r.erase_max),
            r.erase_max - r.erase_min,
            r.ram_bytes / 1024
        );
    }
    Ok(())
}

fn mount_table(cuts: u32) -> Result<(), String> {
    let r = sim_host::mount_cost::measure(SteadyState::ANCHOR_GEOMETRY, 900, cuts, 5)?;
    println!();
    println!(
        "mount cost ({} blocks, {} pages, 90% fill, checkpoint of {} pages):",
        r.blocks, r.pages, r.checkpoint_pages
    );
    println!("  after a clean unmount: {} NAND reads", r.clean_reads);
    println!(
        "  after a power cut ({cuts} random cuts): mean {} reads, worst {} reads ({} pages replayed)",
        r.cut_reads_mean, r.cut_reads_max, r.cut_replayed_max
    );
    println!("  (a full scan would read {} pages)", r.pages);
    Ok(())
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Demo { quick } => {
            let (w, m) = if quick { (1.0, 1.0) } else { (3.0, 3.0) };
            waf_table(&[60.0, 73.0, 80.0, 90.0], w, m, 1)
                .and_then(|_| mount_table(if quick { 5 } else { 20 }))
        }
        Command::Mount { cuts } => mount_table(cuts),
        Command::Waf {
            fill,
            warmup,
            measure,
            seed,
        } => waf_table(&fill, warmup, measure, seed),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ftl-sim: {e}");
            ExitCode::FAILURE
        }
    }
}
