//! Ratios to a baseline variant that the machine's drift does not bias: each run of a variant is
//! divided by what the baseline would have done at its place in the sequence, read on the line
//! between the baseline's runs just before and just after it.
//!
//! On a shared VM the speed of every process drifts by tens of percent within a minute. A run
//! divided by one baseline run (the one before it, say) carries the drift between the two; the
//! line through the runs on both sides cancels a drift that is steady over them.

/// One run of one variant, in the order the runs were made.
pub struct Run {
    pub variant: String,
    pub rate: f64,
    pub p99_ms: f64,
}

/// A variant's runs against the baseline's: requests/s and p99, each as a ratio.
pub struct Bracketed {
    pub variant: String,
    pub rates: Vec<f64>,
    pub p99s: Vec<f64>,
}

/// Every non-baseline variant's runs that have a baseline run on both sides, bracketed.
pub fn bracket(runs: &[Run], baseline: &str) -> Vec<Bracketed> {
    let mut out: Vec<Bracketed> = Vec::new();
    for (i, run) in runs.iter().enumerate() {
        if run.variant == baseline {
            continue;
        }
        let before = runs[..i].iter().rposition(|r| r.variant == baseline);
        let after = runs[i + 1..].iter().position(|r| r.variant == baseline);
        let (Some(b), Some(a)) = (before, after.map(|a| i + 1 + a)) else {
            continue;
        };
        // how far along from the run before to the run after this one was made
        let along = (i - b) as f64 / (a - b) as f64;
        let between = |x: fn(&Run) -> f64| x(&runs[b]) + (x(&runs[a]) - x(&runs[b])) * along;
        let rate = run.rate / between(|r| r.rate);
        let p99 = run.p99_ms / between(|r| r.p99_ms);
        match out.iter_mut().find(|b| b.variant == run.variant) {
            Some(b) => {
                b.rates.push(rate);
                b.p99s.push(p99);
            }
            None => out.push(Bracketed {
                variant: run.variant.clone(),
                rates: vec![rate],
                p99s: vec![p99],
            }),
        }
    }
    out
}

/// How a set of ratios spreads: its mean, the mean's standard error, its least and greatest.
pub struct Spread {
    pub mean: f64,
    pub standard_error: f64,
    pub min: f64,
    pub max: f64,
}

impl Spread {
    /// The spread of `xs` (at least one).
    pub fn of(xs: &[f64]) -> Spread {
        let n = xs.len() as f64;
        let mean = xs.iter().sum::<f64>() / n;
        let variance = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0).max(1.0);
        Spread {
            mean,
            standard_error: (variance / n).sqrt(),
            min: xs.iter().copied().fold(f64::INFINITY, f64::min),
            max: xs.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(variant: &str, rate: f64) -> Run {
        Run {
            variant: variant.into(),
            rate,
            p99_ms: rate / 1000.0,
        }
    }

    #[test]
    fn a_steady_drift_cancels() {
        // the machine slows by 100 req/s a run; the variant serves as the baseline would
        let runs = [
            run("base", 1000.0),
            run("v", 900.0),
            run("base", 800.0),
            run("v", 700.0),
            run("base", 600.0),
        ];
        let b = bracket(&runs, "base");
        assert_eq!(b.len(), 1);
        assert_eq!(b[0].rates, vec![1.0, 1.0]);
        assert_eq!(b[0].p99s, vec![1.0, 1.0]);
    }

    #[test]
    fn a_run_farther_from_one_side_reads_the_line_nearer_the_other() {
        // runs 1 and 4 of the baseline; a variant that serves as it would at runs 2 and 3
        let runs = [
            run("base", 900.0),
            run("v", 800.0),
            run("w", 700.0),
            run("base", 600.0),
        ];
        let b = bracket(&runs, "base");
        assert_eq!(b.len(), 2);
        assert!(b.iter().all(|b| (b.rates[0] - 1.0).abs() < 1e-12));
    }

    #[test]
    fn a_spread_gives_the_standard_error_of_the_mean() {
        // sample variance of 1, 2, 3 is 1: the mean's standard error is 1 / sqrt(3)
        let spread = Spread::of(&[2.0, 1.0, 3.0]);
        assert_eq!((spread.mean, spread.min, spread.max), (2.0, 1.0, 3.0));
        assert!((spread.standard_error - 1.0 / 3f64.sqrt()).abs() < 1e-12);
    }

    #[test]
    fn a_run_without_a_baseline_on_both_sides_is_left_out() {
        let runs = [run("v", 1.0), run("base", 2.0), run("v", 3.0)];
        assert!(bracket(&runs, "base").is_empty());
    }
}
