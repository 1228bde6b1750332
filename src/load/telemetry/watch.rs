//! The scrapers of one trial: a first sample before its first request, a few quick ones
//! ([`FIRST_GAPS`]), then one every [`INTERVAL`] in the background, and a last one after its
//! last request.

use std::time::{Duration, Instant};

use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use super::adapter::{adapter, Adapter};
use super::cross_check::summarize;
use super::page::Page;
use super::read::{read_lines, MAX_PAGE_BYTES};
use super::{EndpointSeries, Sample, TrialTelemetry, INTERVAL};
use crate::engine::Engine;
use crate::load::stream::outcome::Finished;
use crate::load::wire::body::base_url;

/// What one endpoint's scrapes gave: the samples, the scrapes that failed, those that
/// read only the first [`MAX_PAGE_BYTES`] of the page, and the values dropped as impossible.
#[derive(Debug, Default)]
struct Scraped {
    samples: Vec<Sample>,
    failed: u32,
    cut: u32,
    invalid: u32,
}

/// One endpoint's scraper: the stop signal and the task that returns what it scraped.
type Scraper = (oneshot::Sender<()>, JoinHandle<Scraped>);

/// Background scrapers for one trial, one task per endpoint.
pub struct Watch {
    adapter: Adapter,
    tasks: Vec<Scraper>,
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
        let urls: Vec<String> = endpoints
            .iter()
            .map(|e| format!("{}{}", base_url(e), adapter.names.path))
            .collect();
        let first =
            futures::future::join_all(urls.iter().map(|u| scrape(client, u, &adapter, clock)))
                .await;
        let tasks = urls
            .into_iter()
            .zip(first)
            .map(|(url, first)| {
                let (stop, stopped) = oneshot::channel();
                let task = tokio::spawn(scrape_loop(
                    client.clone(),
                    url,
                    adapter,
                    clock,
                    first,
                    stopped,
                ));
                (stop, task)
            })
            .collect();
        Some(Watch { adapter, tasks })
    }

    /// Stops the scrapers (each takes one last sample, after the trial's last request) and
    /// summarises the samples against the trial's requests.
    pub async fn finish(self, finished: &[Finished]) -> Option<TrialTelemetry> {
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
            });
        }
        Some(summarize(&self.adapter, endpoints, finished))
    }
}

async fn scrape_loop(
    client: reqwest::Client,
    url: String,
    adapter: Adapter,
    clock: Instant,
    first: Option<Scrape>,
    mut stop: oneshot::Receiver<()>,
) -> Scraped {
    let mut scraped = Scraped::default();
    let mut keep = |got: Option<Scrape>| match got {
        Some(Scrape {
            sample,
            cut,
            invalid,
        }) => {
            scraped.samples.push(sample);
            scraped.cut += u32::from(cut);
            scraped.invalid = scraped.invalid.saturating_add(invalid);
        }
        None => scraped.failed += 1,
    };
    keep(first);
    let mut gaps = FIRST_GAPS.into_iter().chain(std::iter::repeat(INTERVAL));
    let mut next = tokio::time::Instant::now();
    loop {
        // A scrape that overran delays the next by a whole gap rather than bunching them.
        next = next.max(tokio::time::Instant::now()) + gaps.next().unwrap_or(INTERVAL);
        let last = tokio::select! {
            () = tokio::time::sleep_until(next) => false,
            _ = &mut stop => true,
        };
        keep(scrape(&client, &url, &adapter, clock).await);
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

/// One scrape. Only the adapter's series are kept as the page is read.
async fn scrape(
    client: &reqwest::Client,
    url: &str,
    adapter: &Adapter,
    clock: Instant,
) -> Option<Scrape> {
    let before = clock.elapsed().as_secs_f64();
    let response = client
        .get(url)
        .timeout(Duration::from_secs(2))
        .send()
        .await
        .ok()?;
    if !response.status().is_success() {
        return None;
    }
    let mut page = Page::default();
    let wanted = adapter.wanted();
    let cut = read_lines(response, MAX_PAGE_BYTES, |line| {
        page.add_line(line, |n| wanted.binary_search(&n).is_ok())
    })
    .await
    .ok()?;
    let after = clock.elapsed().as_secs_f64();
    let (sample, invalid) = adapter.checked_sample_of((before + after) / 2.0, &page);
    Some(Scrape {
        sample,
        cut,
        invalid,
    })
}
