//! SVG charts of the benchmarks (plotters): latency distributions of the
//! dispatch benchmark, and parents converged over time.

use std::path::Path;

use plotters::prelude::*;

use super::converge::ConvergeReport;
use super::dispatch::SizeResult;

const COLORS: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
];

fn draw_error(e: impl std::fmt::Display) -> anyhow::Error {
    anyhow::anyhow!("drawing the chart: {e}")
}

/// One chart per size: the latency CDF of each implementation, log time
/// axis, in `dir/dispatch-<bytes>.svg`. Returns the files written.
pub fn dispatch(results: &[SizeResult], dir: &Path) -> anyhow::Result<Vec<std::path::PathBuf>> {
    std::fs::create_dir_all(dir)?;
    let mut files = Vec::new();
    for result in results {
        let path = dir.join(format!("dispatch-{}.svg", result.parent_bytes));
        files.push(path.clone());
        let micros = |d: std::time::Duration| (d.as_secs_f64() * 1e6).max(0.1);
        let (lo, hi) = result
            .rows
            .iter()
            .flat_map(|r| r.samples.iter().copied().map(micros))
            .fold((f64::MAX, 0.0f64), |(lo, hi), v| (lo.min(v), hi.max(v)));
        let root = SVGBackend::new(&path, (900, 500)).into_drawing_area();
        root.fill(&WHITE).map_err(draw_error)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(
                format!(
                    "Reconcile call latency, parent of {} bytes",
                    result.parent_bytes
                ),
                ("sans-serif", 20),
            )
            .margin(15)
            .x_label_area_size(40)
            .y_label_area_size(50)
            .build_cartesian_2d((lo * 0.8..hi * 1.2).log_scale(), 0.0..1.0)
            .map_err(draw_error)?;
        chart
            .configure_mesh()
            .x_desc("latency (µs, log scale)")
            .y_desc("fraction of calls")
            .draw()
            .map_err(draw_error)?;
        for (i, row) in result.rows.iter().enumerate() {
            let color = COLORS[i % COLORS.len()];
            let n = row.samples.len().max(1) as f64;
            let points = row
                .samples
                .iter()
                .enumerate()
                .map(|(k, d)| (micros(*d), (k + 1) as f64 / n));
            chart
                .draw_series(LineSeries::new(points, color.stroke_width(2)))
                .map_err(draw_error)?
                .label(format!("{} (p50 {:.1?})", row.name, row.p50))
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color));
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::LowerRight)
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()
            .map_err(draw_error)?;
        root.present().map_err(draw_error)?;
    }
    Ok(files)
}

/// Parents converged over time, in `path`.
pub fn convergence(report: &ConvergeReport, path: &Path) -> anyhow::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let end = report
        .timelines
        .iter()
        .filter_map(|t| t.points.last().map(|p| p.0))
        .fold(0.1, f64::max);
    let root = SVGBackend::new(path, (900, 500)).into_drawing_area();
    root.fill(&WHITE).map_err(draw_error)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!(
                "Convergence: {} parents x {} children",
                report.parents, report.children_per_parent
            ),
            ("sans-serif", 20),
        )
        .margin(15)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(
            0.0..end * 1.05,
            0usize..report.parents + report.parents / 20 + 1,
        )
        .map_err(draw_error)?;
    chart
        .configure_mesh()
        .x_desc("seconds since the first parent was created")
        .y_desc("parents Synced, observedGeneration current")
        .draw()
        .map_err(draw_error)?;
    for (timeline, color) in report.timelines.iter().zip(COLORS.iter().cycle()) {
        chart
            .draw_series(LineSeries::new(
                timeline.points.iter().copied(),
                color.stroke_width(2),
            ))
            .map_err(draw_error)?
            .label(timeline.implementation.clone())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
            });
    }
    chart
        .configure_series_labels()
        .background_style(WHITE)
        .border_style(BLACK)
        .draw()
        .map_err(draw_error)?;
    root.present().map_err(draw_error)?;
    Ok(())
}
