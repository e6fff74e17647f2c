//! Plots of a run (erase-count histogram, WAF over time, read and write latency CDFs) and of a
//! comparison (relative metrics side by side, write latency CDFs overlaid), each as SVG and PNG.
//!
//! Text is drawn with DejaVu Sans embedded in the binary (`assets/`, Bitstream Vera licence), so
//! the plots do not depend on the fonts of the machine.

use std::path::{Path, PathBuf};
use std::sync::Once;

use plotters::coord::Shift;
use plotters::prelude::*;

use super::report::{Report, COMPARED};
use super::SimOutput;

const FONT: &[u8] = include_bytes!("../../assets/DejaVuSans.ttf");
const SIZE: (u32, u32) = (900, 540);
const PALETTE: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
];

fn register_font() -> Result<(), String> {
    static ONCE: Once = Once::new();
    let mut result = Ok(());
    ONCE.call_once(|| {
        result = plotters::style::register_font("sans-serif", FontStyle::Normal, FONT)
            .map_err(|_| "the embedded font could not be loaded".to_string());
    });
    result
}

/// A chart that can be drawn on any backend.
trait Draw {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), String>
    where
        DB::ErrorType: 'static;
}

/// Draws `f` into `dir/name.svg` and `dir/name.png`; returns both paths.
fn both<D: Draw>(dir: &Path, name: &str, f: &D) -> Result<Vec<PathBuf>, String> {
    register_font()?;
    let svg = dir.join(format!("{name}.svg"));
    let png = dir.join(format!("{name}.png"));
    {
        let root = SVGBackend::new(&svg, SIZE).into_drawing_area();
        root.fill(&WHITE).map_err(|e| e.to_string())?;
        f.draw(&root)?;
        root.present().map_err(|e| format!("{}: {e}", svg.display()))?;
    }
    {
        let root = BitMapBackend::new(&png, SIZE).into_drawing_area();
        root.fill(&WHITE).map_err(|e| e.to_string())?;
        f.draw(&root)?;
        root.present().map_err(|e| format!("{}: {e}", png.display()))?;
    }
    Ok(vec![svg, png])
}

macro_rules! drawer {
    ($name:ident, |$root:ident, $($arg:ident : $ty:ty),*| $body:block) => {
        struct $name<'a> { $($arg: $ty),* , _p: std::marker::PhantomData<&'a ()> }
        impl Draw for $name<'_> {
            fn draw<DB: DrawingBackend>(&self, $root: &DrawingArea<DB, Shift>) -> Result<(), String>
            where DB::ErrorType: 'static {
                let $name { $($arg),* , .. } = self;
                $body
            }
        }
    };
}

fn err<E: std::fmt::Display>(e: E) -> String {
    e.to_string()
}

/// Draws the series labels of `chart` at `position`, boxed on a translucent white ground.
fn legend<'a, DB: DrawingBackend + 'a, CT: CoordTranslate>(
    chart: &mut ChartContext<'a, DB, CT>,
    position: SeriesLabelPosition,
) -> Result<(), String>
where
    DB::ErrorType: 'static,
{
    chart
        .configure_series_labels()
        .position(position)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(err)
}

/// Erase counts in `bins` equal bins: (bin start, blocks).
fn histogram(counts: &[u32], bins: u32) -> Vec<(u32, u32)> {
    let max = counts.iter().copied().max().unwrap_or(0);
    let width = (max / bins + 1).max(1);
    let mut h = vec![0u32; (max / width + 1) as usize];
    for &c in counts {
        h[(c / width) as usize] += 1;
    }
    h.into_iter().enumerate().map(|(i, n)| (i as u32 * width, n)).collect()
}

/// About `points` points of the empirical CDF of sorted samples (ns), as (us, fraction).
fn cdf(sorted: &[u64], points: usize) -> Vec<(f64, f64)> {
    if sorted.is_empty() {
        return Vec::new();
    }
    let n = sorted.len();
    let step = (n / points).max(1);
    let mut v: Vec<(f64, f64)> = (step - 1..n)
        .step_by(step)
        .map(|i| ((sorted[i] as f64 / 1000.0).max(0.1), (i + 1) as f64 / n as f64))
        .collect();
    v.push(((sorted[n - 1] as f64 / 1000.0).max(0.1), 1.0));
    v
}

drawer!(EraseHist, |root, label: &'a str, hist: &'a [(u32, u32)]| {
    let xmin = hist.iter().find(|h| h.1 > 0).map(|h| h.0).unwrap_or(0);
    let xmax = hist.last().map(|(x, _)| x + 1).unwrap_or(1) + hist.get(1).map(|h| h.0).unwrap_or(1);
    let ymax = hist.iter().map(|h| h.1).max().unwrap_or(1) + 1;
    let mut chart = ChartBuilder::on(root)
        .caption(format!("Erase counts per block: {label}"), ("sans-serif", 22))
        .margin(12)
        .x_label_area_size(45)
        .y_label_area_size(60)
        .build_cartesian_2d(xmin..xmax, 0u32..ymax)
        .map_err(err)?;
    chart.configure_mesh().x_desc("erases during the run").y_desc("blocks").draw().map_err(err)?;
    let w = hist.get(1).map(|h| h.0).unwrap_or(1).max(1);
    chart
        .draw_series(
            hist.iter()
                .filter(|h| h.0 >= xmin)
                .map(|&(x, n)| Rectangle::new([(x, 0), (x + w, n)], PALETTE[0].filled())),
        )
        .map_err(err)?;
    Ok(())
});

drawer!(WafOverTime, |root, label: &'a str, series: &'a [(f64, f64, f64)]| {
    let xmax = series.last().map(|s| s.0).unwrap_or(1.0).max(1e-9);
    let ymax = series.iter().map(|s| s.1.max(s.2)).fold(1.0f64, f64::max) * 1.1;
    let mut chart = ChartBuilder::on(root)
        .caption(format!("Write amplification over time: {label}"), ("sans-serif", 22))
        .margin(12)
        .x_label_area_size(45)
        .y_label_area_size(60)
        .build_cartesian_2d(0f64..xmax, 0f64..ymax)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("host writes (device capacities)")
        .y_desc("NAND programs / host writes")
        .draw()
        .map_err(err)?;
    chart
        .draw_series(LineSeries::new(series.iter().map(|s| (s.0, s.1)), PALETTE[1].stroke_width(2)))
        .map_err(err)?
        .label("interval")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], PALETTE[1]));
    chart
        .draw_series(LineSeries::new(series.iter().map(|s| (s.0, s.2)), PALETTE[0].stroke_width(2)))
        .map_err(err)?
        .label("cumulative")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], PALETTE[0]));
    legend(&mut chart, SeriesLabelPosition::MiddleRight)
});

drawer!(Cdfs, |root, title: &'a str, lines: &'a [(String, Vec<(f64, f64)>)]| {
    let xmax = lines.iter().flat_map(|l| l.1.iter().map(|p| p.0)).fold(1.0f64, f64::max) * 1.2;
    let mut chart = ChartBuilder::on(root)
        .caption(*title, ("sans-serif", 22))
        .margin(12)
        .x_label_area_size(45)
        .y_label_area_size(60)
        .build_cartesian_2d((0.1f64..xmax).log_scale(), 0f64..1.0)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("response time (us, log scale)")
        .y_desc("fraction of requests")
        .draw()
        .map_err(err)?;
    for (i, (name, pts)) in lines.iter().enumerate() {
        let c = PALETTE[i % PALETTE.len()];
        chart
            .draw_series(LineSeries::new(pts.iter().copied(), c.stroke_width(2)))
            .map_err(err)?
            .label(name.as_str())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c));
    }
    legend(&mut chart, SeriesLabelPosition::LowerRight)
});

drawer!(Relative, |root, reports: &'a [Report]| {
    let metrics = COMPARED.len();
    let k = reports.len().max(1);
    let rel: Vec<Vec<f64>> = COMPARED
        .iter()
        .map(|(_, f)| {
            let base = reports.first().map(f).unwrap_or(0.0);
            reports.iter().map(|r| if base != 0.0 { f(r) / base } else { 0.0 }).collect()
        })
        .collect();
    let ymax = rel.iter().flatten().copied().fold(1.0f64, f64::max) * 1.15;
    let mut chart = ChartBuilder::on(root)
        .caption("Relative to the first configuration", ("sans-serif", 22))
        .margin(12)
        .x_label_area_size(70)
        .y_label_area_size(60)
        .build_cartesian_2d(0f64..metrics as f64, 0f64..ymax)
        .map_err(err)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(metrics * 2 + 1)
        .x_label_formatter(&|x| {
            let i = x.floor() as usize;
            if (x - i as f64 - 0.5).abs() < 0.01 && i < metrics {
                COMPARED[i].0.to_string()
            } else {
                String::new()
            }
        })
        .y_desc("relative value")
        .draw()
        .map_err(err)?;
    let w = 0.8 / k as f64;
    for (j, r) in reports.iter().enumerate() {
        let c = PALETTE[j % PALETTE.len()];
        chart
            .draw_series((0..metrics).map(|i| {
                let x0 = i as f64 + 0.1 + j as f64 * w;
                Rectangle::new([(x0, 0.0), (x0 + w * 0.9, rel[i][j])], c.filled())
            }))
            .map_err(err)?
            .label(r.label.as_str())
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], c.filled()));
    }
    legend(&mut chart, SeriesLabelPosition::MiddleRight)
});

drawer!(SeriesOverTime, |root, title: &'a str, ylabel: &'a str, series: &'a [(f64, u64)]| {
    let xmax = series.last().map(|s| s.0).unwrap_or(1.0).max(1e-9);
    let ymax = series.iter().map(|s| s.1).max().unwrap_or(1) as f64 * 1.1 + 1.0;
    let mut chart = ChartBuilder::on(root)
        .caption(*title, ("sans-serif", 22))
        .margin(12)
        .x_label_area_size(45)
        .y_label_area_size(60)
        .build_cartesian_2d(0f64..xmax, 0f64..ymax)
        .map_err(err)?;
    chart.configure_mesh().x_desc("host writes (device capacities)").y_desc(*ylabel).draw().map_err(err)?;
    chart
        .draw_series(LineSeries::new(series.iter().map(|s| (s.0, s.1 as f64)), PALETTE[2].stroke_width(2)))
        .map_err(err)?;
    Ok(())
});

/// Draws the plots of one run into `dir` (created if needed); returns the files written.
pub fn run_plots(out: &mut SimOutput, dir: &Path) -> Result<Vec<PathBuf>, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let label = out.report.label.clone();
    let hist = histogram(&out.erase_counts, 40);
    let mut files = Vec::new();
    let d = EraseHist { label: &label, hist: &hist, _p: Default::default() };
    files.extend(both(dir, "erase_histogram", &d)?);
    let d = WafOverTime { label: &label, series: &out.waf_series, _p: Default::default() };
    files.extend(both(dir, "waf_over_time", &d)?);
    let lines = vec![
        ("read".to_string(), cdf(out.read_latency.sorted(), 400)),
        ("write".to_string(), cdf(out.write_latency.sorted(), 400)),
    ];
    let lines: Vec<_> = lines.into_iter().filter(|l| !l.1.is_empty()).collect();
    let title = format!("Response-time CDF: {label}");
    let d = Cdfs { title: &title, lines: &lines, _p: Default::default() };
    files.extend(both(dir, "latency_cdf", &d)?);
    if !out.classifier_series.is_empty() {
        let title = format!("Classifier state over time: {label}");
        let d = SeriesOverTime {
            title: &title,
            ylabel: "extents in use",
            series: &out.classifier_series,
            _p: Default::default(),
        };
        files.extend(both(dir, "classifier_over_time", &d)?);
    }
    Ok(files)
}

/// Draws the comparison plots of several runs into `dir`; returns the files written.
pub fn compare_plots(outs: &mut [SimOutput], dir: &Path) -> Result<Vec<PathBuf>, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let reports: Vec<Report> = outs.iter().map(|o| o.report.clone()).collect();
    let mut files = Vec::new();
    let d = Relative { reports: &reports, _p: Default::default() };
    files.extend(both(dir, "compare_relative", &d)?);
    let lines: Vec<(String, Vec<(f64, f64)>)> =
        outs.iter_mut().map(|o| (o.report.label.clone(), cdf(o.write_latency.sorted(), 400))).collect();
    let d = Cdfs { title: "Write response-time CDF", lines: &lines, _p: Default::default() };
    files.extend(both(dir, "compare_write_cdf", &d)?);
    let lines: Vec<(String, Vec<(f64, f64)>)> =
        outs.iter_mut().map(|o| (o.report.label.clone(), cdf(o.read_latency.sorted(), 400))).collect();
    let lines: Vec<_> = lines.into_iter().filter(|l| !l.1.is_empty()).collect();
    if !lines.is_empty() {
        let d = Cdfs { title: "Read response-time CDF", lines: &lines, _p: Default::default() };
        files.extend(both(dir, "compare_read_cdf", &d)?);
    }
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_bins_cover_every_block() {
        let counts = [0, 1, 5, 5, 9, 100];
        let h = histogram(&counts, 10);
        assert_eq!(h.iter().map(|b| b.1).sum::<u32>(), counts.len() as u32);
        assert_eq!(h[0].0, 0);
    }

    #[test]
    fn cdf_ends_at_one_and_is_monotone() {
        let s: Vec<u64> = (1..=1000).map(|x| x * 1000).collect();
        let c = cdf(&s, 100);
        assert_eq!(c.last().map(|p| p.1), Some(1.0));
        assert!(c.windows(2).all(|w| w[0].0 <= w[1].0 && w[0].1 <= w[1].1));
    }
}
