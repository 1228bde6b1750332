//! The scrapers of one trial: a first sample before its first request, a few quick ones
//! ([`FIRST_GAPS`]), then one every [`INTERVAL`] in the background, and a last one after its
//! last request.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use super::adapter::{adapter, Adapter};
use super::count::ClientCount;
use super::cross_check::summarize;
use super::page::Page;
use super::read::{read_lines, MAX_PAGE_BYTES};
use crate::engine::Engine;
use crate::load::wire::body::base_url;
use crate::record::telemetry::{EndpointSeries, Sample, TrialTelemetry};

/// How often `/metrics` is read during a trial.
pub const INTERVAL: Duration = Duration::from_secs(1);

/// The most samples one endpoint keeps in a trial: over an hour of scrapes at
/// [`INTERVAL`]. Past it the series is thinned ([`Scraped::thin`]) and the scrapes come
/// half as often, so a trial of a week keeps as many samples as one of an hour.
pub const MAX_SAMPLES: usize = 4096;

/// What one endpoint's scrapes gave: the samples, the scrapes that failed, those that
/// read only the first [`MAX_PAGE_BYTES`] of the page, the values dropped as impossible, and
/// the samples dropped to stay within [`MAX_SAMPLES`].
#[derive(Debug, Default)]
struct Scraped {
    samples: Vec<Sample>,
    failed: u32,
    cut: u32,
    invalid: u32,
    dropped: u64,
}

impl Scraped {
    /// Drops every other sample, but never the first or the last, those holding a counter's
    /// first or last value (the cross-check and the preemption count read them) or a
    /// gauge's highest (the saturation signs): what the trial's analysis reads of the series
    /// stays the same, and the gauges' means over time are read from half the samples.
    /// The dropped scrapes' tokens join the intervals around them in `count`.
    fn thin(&mut self, count: &ClientCount, endpoint: usize) {
        let n = self.samples.len();
        let mut keep = vec![false; n];
        let s = &self.samples;
        let counters: [fn(&Sample) -> Option<f64>; 2] =
            [|s| s.generated_tokens_total, |s| s.preemptions_total];
        let kept = (counters.iter())
            .flat_map(|c| {
                [
                    s.iter().position(|x| c(x).is_some()),
                    s.iter().rposition(|x| c(x).is_some()),
                ]
            })
            .chain([Some(0), n.checked_sub(1)])
            .chain([highest(s, |x| x.waiting), highest(s, |x| x.cache_usage)])
            .chain([highest(s, |x| x.cache_usage_ranks.map(f64::from))]);
        for k in kept.flatten() {
            keep[k] = true;
        }
        let mut other = false;
        for k in keep.iter_mut().filter(|k| !**k) {
            *k = other;
            other = !other;
        }
        let mut flags = keep.iter();
        self.samples.retain(|_| *flags.next().unwrap_or(&true));
        self.dropped += (n - self.samples.len()) as u64;
        count.thin(endpoint, &keep);
    }
}

/// The index of the highest value of a gauge (the first of equals), if any sample has it.
fn highest(samples: &[Sample], pick: impl Fn(&Sample) -> Option<f64>) -> Option<usize> {
    let mut best: Option<(usize, f64)> = None;
    for (i, v) in samples.iter().enumerate() {
        if let Some(v) = pick(v).filter(|v| v.is_finite()) {
            if best.is_none_or(|(_, b)| v > b) {
                best = Some((i, v));
            }
        }
    }
    best.map(|(i, _)| i)
}

/// One endpoint's scraper: the stop signal and the task that returns what it scraped.
type Scraper = (oneshot::Sender<()>, JoinHandle<Scraped>);

/// Background scrapers for one trial, one task per endpoint, and the client's tokens placed
/// between their scrapes as the trial's requests finish.
pub struct Watch {
    adapter: Adapter,
    tasks: Vec<Scraper>,
    count: Arc<ClientCount>,
}

impl Watch {
    /// Takes a first sample of every endpoint before the trial's first request (so the
    /// cross-check window holds the whole trial), then scrapes in the background after the
    /// gaps of [`FIRST_GAPS`] and every [`INTERVAL`] after them. None when the engine has no
    /// adapter (an unknown OpenAI-compatible server).
    /// `client` should not be the one sending the requests: a scrape must not take a
    /// keep-alive connection (and a server thread) the load needs.
    pub async fn start(
        client: &reqwest::Client,
        endpoints: &[String],
        engine: Option<Engine>,
        clock: Instant,
    ) -> Option<Watch> {
        let adapter = adapter(engine?)?;
        let count = Arc::new(ClientCount::new(adapter.counting, endpoints.len()));
        let urls: Vec<String> = endpoints
            .iter()
            .map(|e| format!("{}{}", base_url(e), adapter.names.path))
            .collect();
        let scrapings: Vec<Scraping> = (urls.iter().enumerate())
            .map(|(i, url)| Scraping {
                client,
                url,
                adapter: &adapter,
                clock,
                count: &count,
                endpoint: i,
            })
            .collect();
        let first = futures::future::join_all(scrapings.iter().map(Scraping::scrape)).await;
        drop(scrapings);
        let tasks = urls
            .into_iter()
            .zip(first)
            .enumerate()
            .map(|(i, (url, first))| {
                let (stop, stopped) = oneshot::channel();
                let task = tokio::spawn(scrape_loop(
                    client.clone(),
                    url,
                    adapter,
                    clock,
                    (Arc::clone(&count), i),
                    first,
                    stopped,
                ));
                (stop, task)
            })
            .collect();
        Some(Watch {
            adapter,
            tasks,
            count,
        })
    }

    /// Where the trial's finished requests go, to be placed between the scrapes.
    pub fn count(&self) -> Arc<ClientCount> {
        Arc::clone(&self.count)
    }

    /// Stops the scrapers (each takes one last sample, after the trial's last request) and
    /// summarises the samples against the tokens the trial's requests received.
    pub async fn finish(self) -> Option<TrialTelemetry> {
        let mut endpoints = Vec::new();
        for (i, (stop, task)) in self.tasks.into_iter().enumerate() {
            let _ = stop.send(());
            let scraped = task.await.unwrap_or_default();
            endpoints.push(EndpointSeries {
                endpoint: i,
                samples: scraped.samples,
                failed_scrapes: scraped.failed,
                cut_scrapes: scraped.cut,
                invalid_values: scraped.invalid,
                dropped_samples: scraped.dropped,
            });
        }
        Some(summarize(&self.adapter, endpoints, &self.count))
    }
}

async fn scrape_loop(
    client: reqwest::Client,
    url: String,
    adapter: Adapter,
    clock: Instant,
    (count, endpoint): (Arc<ClientCount>, usize),
    first: Option<Scrape>,
    mut stop: oneshot::Receiver<()>,
) -> Scraped {
    let mut scraped = Scraped::default();
    let mut interval = INTERVAL;
    let mut keep = |got: Option<Scrape>, interval: &mut Duration| match got {
        Some(Scrape {
            sample,
            cut,
            invalid,
        }) => {
            scraped.samples.push(sample);
            scraped.cut += u32::from(cut);
            scraped.invalid = scraped.invalid.saturating_add(invalid);
            if scraped.samples.len() >= MAX_SAMPLES {
                scraped.thin(&count, endpoint);
                *interval *= 2;
            }
        }
        None => scraped.failed += 1,
    };
    keep(first, &mut interval);
    let mut first_gaps = FIRST_GAPS.into_iter();
    let mut next = tokio::time::Instant::now();
    let to = Scraping {
        client: &client,
        url: &url,
        adapter: &adapter,
        clock,
        count: &count,
        endpoint,
    };
    loop {
        // A scrape that overran delays the next by a whole gap rather than bunching them.
        next = next.max(tokio::time::Instant::now()) + first_gaps.next().unwrap_or(interval);
        let last = tokio::select! {
            () = tokio::time::sleep_until(next) => false,
            _ = &mut stop => true,
        };
        keep(to.scrape().await, &mut interval);
        if last {
            return scraped;
        }
    }
}

/// The gaps before the first background scrapes (at 0.1, 0.2, 0.4 and 0.8 s), before one
/// every [`INTERVAL`]: a short trial's queue forms and drains within a second, and sampled
/// once a second it would be seen only idle, at the trial's two ends. Four scrapes more per
/// trial; `gate/explain` weighs each sample by the time around it, so the denser start does
/// not weigh more.
pub const FIRST_GAPS: [Duration; 4] = [
    Duration::from_millis(100),
    Duration::from_millis(100),
    Duration::from_millis(200),
    Duration::from_millis(400),
];

/// One scrape's sample, whether the page was cut at [`MAX_PAGE_BYTES`], and how many of its
/// values were dropped as impossible.
struct Scrape {
    sample: Sample,
    cut: bool,
    invalid: u32,
}

/// What a scrape of one endpoint needs.
struct Scraping<'a> {
    client: &'a reqwest::Client,
    url: &'a str,
    adapter: &'a Adapter,
    clock: Instant,
    count: &'a ClientCount,
    endpoint: usize,
}

impl Scraping<'_> {
    /// One scrape, its start and end told to the client's count (no sample it gives is
    /// earlier than its start, so the tokens received before it can be placed at once).
    async fn scrape(&self) -> Option<Scrape> {
        let before = self.clock.elapsed().as_secs_f64();
        self.count.scrape_began(self.endpoint, before);
        let got = self.get(before).await;
        self.count
            .scrape_ended(self.endpoint, got.as_ref().map(|s| s.sample.t));
        got
    }

    /// The GET. Only the adapter's series are kept as the page is read.
    async fn get(&self, before: f64) -> Option<Scrape> {
        let response = self
            .client
            .get(self.url)
            .timeout(Duration::from_secs(2))
            .send()
            .await
            .ok()?;
        if !response.status().is_success() {
            return None;
        }
        let mut page = Page::default();
        let wanted = self.adapter.wanted();
        let cut = read_lines(response, MAX_PAGE_BYTES, |line| {
            page.add_line(line, |n| wanted.binary_search(&n).is_ok())
        })
        .await
        .ok()?;
        let after = self.clock.elapsed().as_secs_f64();
        let (sample, invalid) = self
            .adapter
            .checked_sample_of((before + after) / 2.0, &page);
        Some(Scrape {
            sample,
            cut,
            invalid,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::telemetry::Counting;

    /// Thinned, a series keeps its ends, its counters' first and last values and its
    /// gauges' highest, drops every other one of the rest, and the client's count between
    /// the scrapes kept is what it was.
    #[test]
    fn a_thinned_series_keeps_what_the_analysis_reads() {
        let n = 21;
        let samples: Vec<Sample> = (0..n)
            .map(|i| {
                let x = i as f64;
                Sample {
                    t: x,
                    running: Some(1.0),
                    waiting: Some(if i == 7 { 50.0 } else { 1.0 }),
                    cache_usage: Some(if i == 9 { 0.99 } else { 0.5 }),
                    cache_usage_ranks: None,
                    // The counter is missing from the first two and the last scrapes.
                    generated_tokens_total: (2..n - 1).contains(&i).then_some(10.0 * x),
                    preemptions_total: (i == 3 || i == 11).then_some(x),
                }
            })
            .collect();
        let count = ClientCount::new(Counting::AtCompletion, 1);
        let mut request = crate::load::stream::outcome::a_finished_request(0.0, 0.0);
        for s in &samples {
            count.scrape_began(0, s.t);
            count.scrape_ended(0, Some(s.t));
        }
        for i in 0..n {
            request.record.end_s = i as f64 + 0.5;
            request.record.output_tokens = 1 + i as u64;
            count.add(&request);
        }
        let before = count.between(0, 2, n - 2);
        let mut scraped = Scraped {
            samples: samples.clone(),
            ..Scraped::default()
        };
        scraped.thin(&count, 0);
        let kept: Vec<usize> = scraped.samples.iter().map(|s| s.t as usize).collect();
        for must in [0, n - 1, 2, n - 2, 3, 11, 7, 9] {
            assert!(kept.contains(&must), "{must} not in {kept:?}");
        }
        assert_eq!(scraped.dropped as usize, n - kept.len());
        assert!(kept.len() <= n / 2 + 8, "{kept:?}");
        let (a, b) = (
            kept.iter().position(|&k| k == 2).unwrap(),
            kept.iter().position(|&k| k == n - 2).unwrap(),
        );
        assert_eq!(count.between(0, a, b), before);
    }
}
